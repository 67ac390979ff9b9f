//! The WebSocket transport at `/ws` and the browser login: a real server (TCP and HTTP on
//! loopback), a real WebSocket client and real HTTP requests. Login by cookie or by password,
//! calls, subscriptions and streamed chat in canonical JSON, same-origin only, the cookie's
//! revocation, and the abuse a TCP client may try (oversized and malformed messages, floods
//! before login, a reader that never reads) hurting no other client.

use std::net::SocketAddr;

use futures::{SinkExt, StreamExt};
use plant_model::{Quality, TagValue};
use scripted_llm::ScriptedLlm;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;
use tserver::http_surface::HttpConfig;
use tserver::{Runtime, Server, ServerConfig};

use crate::chat::{streamed_answer, streamed_tool_call};
use crate::support::{PATIENCE, RawConnection, Solution, admin};

const PASSWORD: &str = "correct horse battery";

/// A server with its display port and its HTTP surface, over a demo solution with the
/// operator `ada` (password [`PASSWORD`]).
struct Rig {
    /// The solution's file or database URL.
    location: String,
    /// Keeps a file solution's directory alive.
    _solution: Option<Solution>,
    tcp: SocketAddr,
    http: SocketAddr,
    runtime: Runtime,
    shutdown: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Rig {
    async fn start() -> Self {
        Self::start_with(Solution::demo(), ServerConfig::default()).await
    }

    /// A rig whose addresses are locked out for 5 minutes after `free_failures` failed logins.
    async fn throttled(free_failures: u32) -> Self {
        let throttle = store::LoginThrottleConfig {
            free_failures,
            first_lockout: std::time::Duration::from_secs(300),
            ..store::LoginThrottleConfig::default()
        };
        Self::start_with(
            Solution::demo(),
            ServerConfig::default().with_login_throttle(throttle),
        )
        .await
    }

    async fn start_with(solution: Solution, config: ServerConfig) -> Self {
        let location = solution.path.to_str().expect("utf-8 path").to_owned();
        add_ada(&location);
        Self::serving(location, Some(solution), config, HttpConfig::default()).await
    }

    /// A node serving the solution at `location` (a file or a database), whose users exist.
    async fn serving(
        location: String,
        solution: Option<Solution>,
        config: ServerConfig,
        http_config: HttpConfig,
    ) -> Self {
        let at: store::SolutionLocation = location.parse().expect("a solution location");
        let runtime = Runtime::open_at(&at).await.expect("solution opens");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let http_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let tcp = listener.local_addr().expect("addr");
        let http = http_listener.local_addr().expect("addr");
        let shutdown = CancellationToken::new();
        let server = Server::new(runtime.clone(), config).expect("server");
        let http_config = HttpConfig {
            sessions: Some(server.websocket_sessions()),
            accepting: Some(server.accepting()),
            ..http_config
        };
        let surface =
            tserver::http_surface::serve(http_listener, runtime.clone(), http_config, shutdown.clone());
        let tasks = vec![
            tokio::spawn(async move {
                surface.await.expect("the HTTP surface serves");
            }),
            tokio::spawn(server.run(listener, shutdown.clone())),
        ];
        Self {
            location,
            _solution: solution,
            tcp,
            http,
            runtime,
            shutdown,
            tasks,
        }
    }

    fn path(&self) -> &str {
        &self.location
    }

    fn origin(&self) -> String {
        format!("http://{}", self.http)
    }

    /// `POST /api/login` from a page of this server: the status, the JSON body and the
    /// `Set-Cookie` header.
    async fn login(&self, user: &str, password: &str) -> (u16, Value, Option<String>) {
        self.login_for("127.0.0.1", user, password).await
    }

    /// As [`Self::login`], for the client a trusted proxy forwards for (`X-Forwarded-For`).
    async fn login_for(&self, client: &str, user: &str, password: &str) -> (u16, Value, Option<String>) {
        let response = reqwest::Client::new()
            .post(format!("{}/api/login", self.origin()))
            .header("Origin", self.origin())
            .header("X-Forwarded-For", client)
            .json(&json!({"user": user, "password": password}))
            .send()
            .await
            .expect("the login answers");
        let status = response.status().as_u16();
        let cookie = response
            .headers()
            .get("set-cookie")
            .map(|value| value.to_str().expect("ASCII").to_owned());
        let body = response.json().await.expect("a JSON body");
        (status, body, cookie)
    }

    /// Logs `ada` in: the `name=value` of the session cookie.
    async fn cookie(&self) -> String {
        let (status, body, cookie) = self.login("ada", PASSWORD).await;
        assert_eq!(
            (status, &body),
            (200, &json!({"user": "ada", "role": "operator"}))
        );
        let cookie = cookie.expect("a session cookie");
        cookie.split(';').next().expect("name=value").to_owned()
    }

    /// `POST /api/logout` with `cookie`: the response.
    async fn logout(&self, cookie: &str) -> reqwest::Response {
        reqwest::Client::new()
            .post(format!("{}/api/logout", self.origin()))
            .header("Origin", self.origin())
            .header("Cookie", cookie)
            .send()
            .await
            .expect("answers")
    }

    /// `GET /api/me` with `cookie`: the status.
    async fn me(&self, cookie: &str) -> u16 {
        me_at(self.origin(), cookie.to_owned()).await
    }

    /// A WebSocket from a page of this server, with `cookie` if given.
    async fn socket(&self, cookie: Option<&str>) -> Ws {
        let origin = self.origin();
        let mut headers = vec![("Origin", origin.as_str())];
        headers.extend(cookie.map(|cookie| ("Cookie", cookie)));
        self.socket_with(&headers).await.expect("the upgrade succeeds")
    }

    /// A WebSocket upgrade sent with `headers`.
    async fn socket_with(&self, headers: &[(&'static str, &str)]) -> Result<Ws, tungstenite::Error> {
        let mut request = format!("ws://{}/ws", self.http)
            .into_client_request()
            .expect("a request");
        for (name, value) in headers {
            request
                .headers_mut()
                .insert(*name, value.parse().expect("a header value"));
        }
        let (socket, _) = tokio_tungstenite::connect_async(request).await?;
        Ok(Ws { socket })
    }

    async fn stop(self) {
        self.shutdown.cancel();
        for task in self.tasks {
            tokio::time::timeout(PATIENCE, task)
                .await
                .expect("stops within the patience")
                .expect("no panic");
        }
    }
}

/// `GET /api/me` on the server at `origin` with `cookie`: the status.
async fn me_at(origin: String, cookie: String) -> u16 {
    reqwest::Client::new()
        .get(format!("{origin}/api/me"))
        .header("Cookie", cookie)
        .send()
        .await
        .expect("answers")
        .status()
        .as_u16()
}

/// Adds the operator `ada` (password [`PASSWORD`]) to the solution at `location`.
fn add_ada(location: &str) {
    admin(
        &["users", location, "add", "ada", "--role", "operator"],
        &format!("{PASSWORD}\n"),
    );
}

/// A WebSocket client speaking JSON frames.
struct Ws {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl Ws {
    async fn send(&mut self, frame: Value) {
        self.send_text(&frame.to_string()).await;
    }

    async fn send_text(&mut self, text: &str) {
        self.socket.send(Message::text(text)).await.expect("message sent");
    }

    /// The next frame, or `None` once the server closed the socket.
    async fn receive(&mut self) -> Option<Value> {
        loop {
            let next = tokio::time::timeout(PATIENCE, self.socket.next())
                .await
                .expect("a message or a close within the patience");
            match next {
                Some(Ok(Message::Text(text))) => return Some(serde_json::from_str(&text).expect("JSON")),
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return None,
                Some(Ok(_)) => {}
            }
        }
    }

    /// Sends `frame` and returns the next frame.
    async fn call(&mut self, frame: Value) -> Value {
        self.send(frame).await;
        self.receive().await.expect("a reply")
    }

    /// Pings and asserts the pong.
    async fn pings(&mut self) {
        let pong = self.call(json!({"callId": "99", "ping": {"nonce": "42"}})).await;
        assert_eq!(
            (&pong["callId"], &pong["pong"]["nonce"]),
            (&json!("99"), &json!("42")),
            "{pong}"
        );
    }

    /// Says Hello as `user` (empty: the cookie's login).
    async fn hello(&mut self, user: &str, password: &str) -> Value {
        self.call(json!({"callId": "1", "hello": {"protocolVersion": 1, "clientName": "websocket tests", "userName": user, "password": password}}))
            .await
    }

    /// Reads frames until the server closes; returns the last frame before the close.
    async fn last_words(&mut self) -> Option<Value> {
        let mut last = None;
        while let Some(frame) = self.receive().await {
            last = Some(frame);
        }
        last
    }
}

fn error_code(frame: &Value) -> &str {
    frame["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("an error frame: {frame}"))
}

/// Asserts `frame` is an error with `code` whose message says `saying`.
fn assert_error(frame: &Value, code: &str, saying: &str) {
    assert_eq!(error_code(frame), code, "{frame}");
    let message = frame["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(saying), "{frame}");
}

#[tokio::test]
async fn a_browser_logs_in_once_and_its_websocket_says_hello_with_the_cookie() {
    let rig = Rig::start().await;
    let (status, body, cookie) = rig.login("ada", PASSWORD).await;
    assert_eq!(
        (status, &body),
        (200, &json!({"user": "ada", "role": "operator"}))
    );
    let cookie = cookie.expect("a session cookie");
    for attribute in ["tserver_session=", "HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain HTTP: {cookie}");
    let cookie = cookie.split(';').next().expect("name=value").to_owned();
    assert_eq!(rig.me(&cookie).await, 200);
    // Without a cookie nobody logs in from the browser yet: a first visit, which the panel's
    // first load asks about, is no failed request.
    assert_eq!(rig.me("").await, 204);

    let mut ws = rig.socket(Some(&cookie)).await;
    let hello = ws.hello("", "").await;
    assert_eq!(hello["callId"], "1");
    assert_eq!(hello["hello"]["userName"], "ada");
    assert_eq!(hello["hello"]["protocolVersion"], 1);
    ws.pings().await;
    rig.stop().await;
}

#[tokio::test]
async fn without_a_cookie_hello_takes_a_password_and_calls_subscriptions_and_updates_flow() {
    let rig = Rig::start().await;
    let mut ws = rig.socket(None).await;
    let hello = ws.hello("ada", PASSWORD).await;
    assert_eq!(hello["hello"]["userName"], "ada");

    let read = ws
        .call(json!({"callId": "2", "readTags": {"names": ["Pump1.MotorCurrent"]}}))
        .await;
    let reading = &read["readTags"]["readings"][0];
    assert_eq!(reading["name"], "Pump1.MotorCurrent");
    assert!(reading["number"].is_number(), "{read}");
    // 64-bit fields are JSON strings.
    assert!(reading["timestampMs"].is_string(), "{read}");

    let subscribed = ws
        .call(json!({"callId": "3", "subscribe": {"names": ["Pump1.MotorCurrent"]}}))
        .await;
    assert_eq!(subscribed["callId"], "3");
    assert_eq!(
        subscribed["subscribe"]["readings"][0]["name"], "Pump1.MotorCurrent",
        "{subscribed}"
    );
    rig.runtime
        .plant()
        .write("Pump1.MotorCurrent", TagValue::Number(77.5), Quality::GOOD)
        .expect("written");
    let update = loop {
        let frame = ws.receive().await.expect("an update");
        if frame.get("tagUpdate").is_some() {
            break frame;
        }
    };
    assert_eq!(update["callId"], "3");
    assert_eq!(update["tagUpdate"]["readings"][0]["number"], 77.5, "{update}");
    rig.stop().await;
}

#[tokio::test]
async fn a_streamed_chat_over_the_websocket_shows_progress_then_the_reply() {
    let llm = ScriptedLlm::start(vec![streamed_tool_call(), streamed_answer("Pump 1 is fine.")])
        .await
        .expect("the scripted model starts");
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path").to_owned();
    admin(&["settings", &path, "set", "URL", &llm.url()], "");
    admin(&["settings", &path, "set", "ModelEnabled", "true"], "");
    let rig = Rig::start_with(solution, ServerConfig::default()).await;
    let mut ws = rig.socket(Some(&rig.cookie().await)).await;
    assert_eq!(ws.hello("", "").await["hello"]["userName"], "ada");

    ws.send(json!({"callId": "5", "chat": {"queryJson": "What is wrong with Pump 1?", "stream": true}}))
        .await;
    let mut events = Vec::new();
    let reply = loop {
        let frame = ws.receive().await.expect("a frame");
        assert_eq!(frame["callId"], "5", "{frame}");
        match frame.get("chatProgress") {
            Some(progress) => events.extend(progress["events"].as_array().expect("events").iter().cloned()),
            None => break frame,
        }
    };
    assert_eq!(
        events[0]["toolStarted"]["name"], "runtime_get_value",
        "{events:?}"
    );
    assert_eq!(events[1]["toolFinished"]["ok"], true, "{events:?}");
    let text: String = events.iter().filter_map(|event| event["text"].as_str()).collect();
    assert_eq!(text, "Pump 1 is fine.");
    let envelope: Value =
        serde_json::from_str(reply["chat"]["replyJson"].as_str().expect("the envelope")).expect("JSON");
    assert_eq!(envelope["text"], "Pump 1 is fine.", "{envelope}");
    rig.stop().await;
}

#[tokio::test]
async fn an_upgrade_from_another_origin_or_none_is_refused_with_403() {
    let rig = Rig::start().await;
    for origin in [Some("http://evil.example"), Some("null"), None] {
        let headers: Vec<(&str, &str)> = origin.map(|origin| ("Origin", origin)).into_iter().collect();
        match rig.socket_with(&headers).await {
            Err(tungstenite::Error::Http(response)) => assert_eq!(response.status(), 403, "{origin:?}"),
            Err(other) => panic!("{origin:?}: refused otherwise: {other}"),
            Ok(_) => panic!("{origin:?}: upgraded"),
        }
    }
    // A login posted by another site's page is refused too.
    let response = reqwest::Client::new()
        .post(format!("{}/api/login", rig.origin()))
        .header("Origin", "http://evil.example")
        .json(&json!({"user": "ada", "password": PASSWORD}))
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), 403);
    rig.stop().await;
}

#[tokio::test]
async fn a_wrong_password_is_401_and_repeated_failures_are_throttled_with_429() {
    let rig = Rig::throttled(store::LoginThrottleConfig::default().free_failures).await;
    let (status, body, cookie) = rig.login("ada", "wrong").await;
    assert_eq!(
        (status, &body),
        (401, &json!({"error": "unknown user or wrong password"}))
    );
    assert_eq!(cookie, None);
    let mut statuses = vec![status];
    while statuses.len() < 10 && statuses.last() != Some(&429) {
        statuses.push(rig.login("ada", "wrong").await.0);
    }
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    // The lockout is the address's, whichever door it knocks at: Hello over the WebSocket too.
    let mut ws = rig.socket(None).await;
    assert_eq!(
        error_code(&ws.hello("ada", PASSWORD).await),
        "ERROR_CODE_LOGIN_THROTTLED"
    );
    rig.stop().await;
}

#[tokio::test]
async fn the_cookie_ends_at_logout_and_when_the_user_is_changed_or_removed() {
    let rig = Rig::start().await;

    let cookie = rig.cookie().await;
    let response = rig.logout(&cookie).await;
    assert_eq!(response.status(), 204);
    let cleared = response.headers()["set-cookie"].to_str().expect("ASCII");
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    assert_eq!(rig.me(&cookie).await, 401);
    let mut ws = rig.socket(Some(&cookie)).await;
    assert_eq!(error_code(&ws.hello("", "").await), "ERROR_CODE_LOGIN_FAILED");

    let cookie = rig.cookie().await;
    admin(&["users", rig.path(), "passwd", "ada"], "another password\n");
    assert_eq!(rig.me(&cookie).await, 401);
    let mut ws = rig.socket(Some(&cookie)).await;
    assert_eq!(error_code(&ws.hello("", "").await), "ERROR_CODE_LOGIN_FAILED");

    admin(&["users", rig.path(), "passwd", "ada"], &format!("{PASSWORD}\n"));
    let cookie = rig.cookie().await;
    admin(&["users", rig.path(), "remove", "ada"], "");
    assert_eq!(rig.me(&cookie).await, 401);
    let mut ws = rig.socket(Some(&cookie)).await;
    assert_eq!(error_code(&ws.hello("", "").await), "ERROR_CODE_LOGIN_FAILED");
    rig.stop().await;
}

#[tokio::test]
async fn an_oversized_message_closes_the_socket_with_frame_too_large() {
    let rig = Rig::start().await;
    // Before login the limit is the small login frame limit.
    let mut ws = rig.socket(None).await;
    let padding = "x".repeat(64 * 1024);
    ws.send_text(&format!(
        r#"{{"callId":"1","hello":{{"clientName":"{padding}"}}}}"#
    ))
    .await;
    let last = ws.last_words().await.expect("a reason before the close");
    assert_eq!(error_code(&last), "ERROR_CODE_FRAME_TOO_LARGE", "{last}");
    // After login, past the frame limit the socket's own bound refuses it.
    let mut ws = rig.socket(None).await;
    ws.hello("ada", PASSWORD).await;
    let padding = "x".repeat(tserver_proto::DEFAULT_MAX_FRAME + 1);
    ws.send_text(&format!(
        r#"{{"callId":"2","readTags":{{"names":["{padding}"]}}}}"#
    ))
    .await;
    let last = ws.last_words().await.expect("a reason before the close");
    assert_eq!(error_code(&last), "ERROR_CODE_FRAME_TOO_LARGE", "{last}");
    rig.stop().await;
}

#[tokio::test]
async fn a_flood_of_messages_before_login_closes_the_socket() {
    let rig = Rig::start().await;
    let mut ws = rig.socket(None).await;
    for call_id in 1..=20 {
        // The server may close before the last are sent.
        let ping = json!({"callId": call_id.to_string(), "ping": {}}).to_string();
        let _ = ws.socket.send(Message::text(ping)).await;
    }
    let last = ws.last_words().await.expect("a reason before the close");
    assert_error(&last, "ERROR_CODE_UNAUTHENTICATED", "before logging in");
    rig.stop().await;
}

#[tokio::test]
async fn bad_json_is_answered_malformed_frame_and_harms_no_one() {
    let rig = Rig::start().await;
    let mut bad = rig.socket(None).await;
    bad.hello("ada", PASSWORD).await;
    let mut other = rig.socket(None).await;
    other.hello("ada", PASSWORD).await;
    let mut tcp = RawConnection::guest(rig.tcp).await;

    for text in [
        "{",
        "not json",
        r#"{"callId":"x"}"#,
        r#"{"ping":{"nonce":"twelve"}}"#,
        "[]",
    ] {
        let answer = bad.call_text(text).await;
        assert_eq!(answer["callId"], Value::Null, "call id 0 is left out: {answer}");
        assert_error(&answer, "ERROR_CODE_MALFORMED_FRAME", "JSON");
    }
    // The socket that sent it goes on, as do the others.
    bad.pings().await;
    other.pings().await;
    tcp.send(4, tserver_proto::v1::client_frame::Body::Ping(Default::default()))
        .await;
    let pong = tcp.receive().await.expect("a pong");
    assert!(
        matches!(pong.body, Some(tserver_proto::v1::server_frame::Body::Pong(_))),
        "{pong:?}"
    );
    rig.stop().await;
}

#[tokio::test]
async fn a_reader_that_never_reads_is_cut_and_others_go_on() {
    let config = ServerConfig::default().with_write_timeout(std::time::Duration::from_secs(1));
    let rig = Rig::start_with(Solution::demo(), config).await;
    let cookie = rig.cookie().await;
    let mut stalled = rig.socket(Some(&cookie)).await;
    stalled.hello("", "").await;
    let mut other = rig.socket(Some(&cookie)).await;
    other.hello("", "").await;

    // Large replies asked for again and again, never read: the server's writes fill the
    // socket's buffers, stall for the write timeout, and it closes the connection. Sending
    // then fails (the peer is gone) or stalls in turn (no one reads our messages either).
    let names: Vec<String> = (0..200).map(|_| "Pump1.MotorCurrent".to_owned()).collect();
    let request = json!({"callId": "7", "readTags": {"names": names}}).to_string();
    let sender = tokio::spawn(async move {
        let mut sent = 0_u64;
        loop {
            if stalled
                .socket
                .send(Message::text(request.as_str()))
                .await
                .is_err()
            {
                return sent;
            }
            sent += 1;
        }
    });
    // Bounded, not timed: the cut happens within the write timeout plus the patience.
    let sent = tokio::time::timeout(PATIENCE * 3, sender)
        .await
        .expect("the stalled reader is cut")
        .expect("no panic");
    assert!(sent > 0);
    other.pings().await;
    let mut tcp = RawConnection::guest(rig.tcp).await;
    tcp.send(3, tserver_proto::v1::client_frame::Body::Ping(Default::default()))
        .await;
    assert!(tcp.receive().await.is_some());
    rig.stop().await;
}

impl Ws {
    /// Sends `text` as it is and returns the next frame.
    async fn call_text(&mut self, text: &str) -> Value {
        self.send_text(text).await;
        self.receive().await.expect("a reply")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_login_made_on_one_node_logs_in_on_another_and_ends_on_both() {
    let database = store::test_database::TestDatabase::create().await;
    let url = database.url();
    admin(&["init", &url, "--demo"], "");
    add_ada(&url);
    let one = Rig::serving(url.clone(), None, ServerConfig::default(), HttpConfig::default()).await;
    let two = Rig::serving(url, None, ServerConfig::default(), HttpConfig::default()).await;

    // Behind a load balancer both nodes are one origin: the browser sends its cookie to either.
    let cookie = one.cookie().await;
    assert_eq!(two.me(&cookie).await, 200);
    let mut ws = two.socket(Some(&cookie)).await;
    assert_eq!(ws.hello("", "").await["hello"]["userName"], "ada");
    ws.pings().await;

    assert_eq!(two.logout(&cookie).await.status(), 204);
    assert_eq!(one.me(&cookie).await, 401);
    let mut ws = one.socket(Some(&cookie)).await;
    assert_eq!(error_code(&ws.hello("", "").await), "ERROR_CODE_LOGIN_FAILED");
    one.stop().await;
    two.stop().await;
}

#[tokio::test]
async fn a_program_speaks_protobuf_in_binary_messages_and_is_answered_in_kind() {
    use prost::Message as _;
    use tserver_proto::v1::{ClientFrame, Ping, ServerFrame, client_frame, server_frame};
    let rig = Rig::start().await;
    let mut ws = rig.socket(None).await;
    let frames = [
        (1, crate::support::hello("ada", PASSWORD)),
        (2, client_frame::Body::Ping(Ping { nonce: 77 })),
    ];
    let mut replies = Vec::new();
    for (call_id, body) in frames {
        let frame = ClientFrame {
            call_id,
            body: Some(body),
        };
        ws.socket
            .send(Message::binary(frame.encode_to_vec()))
            .await
            .expect("sent");
        let reply = tokio::time::timeout(PATIENCE, ws.socket.next())
            .await
            .expect("a reply within the patience");
        match reply {
            Some(Ok(Message::Binary(bytes))) => replies.push(ServerFrame::decode(bytes).expect("protobuf")),
            other => panic!("expected a binary reply, got {other:?}"),
        }
    }
    assert!(
        matches!(&replies[0].body, Some(server_frame::Body::Hello(hello)) if hello.user_name == "ada"),
        "{replies:?}"
    );
    assert!(
        matches!(&replies[1].body, Some(server_frame::Body::Pong(pong)) if pong.nonce == 77),
        "{replies:?}"
    );
    // Back to text: the answer follows the form of the last message.
    ws.pings().await;
    rig.stop().await;
}

#[tokio::test]
async fn at_shutdown_a_websocket_is_told_and_closed_as_a_tcp_connection_is() {
    let rig = Rig::start().await;
    let mut ws = rig.socket(None).await;
    ws.hello("ada", PASSWORD).await;
    let mut tcp = RawConnection::guest(rig.tcp).await;
    rig.shutdown.cancel();
    let last = ws.last_words().await.expect("a reason before the close");
    assert_error(&last, "ERROR_CODE_SHUTTING_DOWN", "shutting down");
    let mut tcp_last = None;
    while let Some(frame) = tcp.receive().await {
        tcp_last = Some(frame);
    }
    let tcp_last = tcp_last.expect("a reason before the close");
    assert_eq!(
        crate::support::error_of(&tcp_last).0,
        tserver_proto::v1::ErrorCode::ShuttingDown
    );
    rig.stop().await;
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_login_throttle_counts_the_forwarded_client() {
    let throttle = store::LoginThrottleConfig {
        first_lockout: std::time::Duration::from_secs(300),
        ..store::LoginThrottleConfig::default()
    };
    let trusted: tserver::proxy::TrustedNetwork = "127.0.0.1/32".parse().expect("a network");
    let http = HttpConfig {
        trusted_proxies: tserver::proxy::TrustedProxies::new(vec![trusted.0]),
        ..HttpConfig::default()
    };
    let solution = Solution::demo();
    let location = solution.path.to_str().expect("utf-8 path").to_owned();
    add_ada(&location);
    let config = ServerConfig::default().with_login_throttle(throttle);
    let rig = Rig::serving(location, Some(solution), config, http).await;

    let mut statuses = Vec::new();
    while statuses.len() < 10 && statuses.last() != Some(&429) {
        statuses.push(rig.login_for("10.0.0.1", "ada", "wrong").await.0);
    }
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    // Another client behind the same proxy is not locked out.
    assert_eq!(rig.login_for("10.0.0.2", "ada", PASSWORD).await.0, 200);
    // Nor is it over the WebSocket, where the locked-out client still is.
    let origin = rig.origin();
    for (client, expected) in [("10.0.0.1", false), ("10.0.0.2", true)] {
        let headers = [("Origin", origin.as_str()), ("X-Forwarded-For", client)];
        let mut ws = rig.socket_with(&headers).await.expect("upgraded");
        let hello = ws.hello("ada", PASSWORD).await;
        if expected {
            assert_eq!(hello["hello"]["userName"], "ada", "{client}: {hello}");
        } else {
            assert_eq!(error_code(&hello), "ERROR_CODE_LOGIN_THROTTLED", "{client}");
        }
    }
    rig.stop().await;
}

/// The status code of one raw HTTP/1.1 request to `http` (the connection closed after it).
async fn raw_status(http: SocketAddr, request: &str) -> u16 {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = TcpStream::connect(http).await.expect("connects");
    stream.write_all(request.as_bytes()).await.expect("sends");
    let mut head = vec![0_u8; 12];
    tokio::time::timeout(PATIENCE, stream.read_exact(&mut head))
        .await
        .expect("answers in time")
        .expect("a status line");
    let line = String::from_utf8_lossy(&head);
    line.strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not a status line: {line:?}"))
}

/// What a browser sends after a hostile page rebound its own name to this server: `Origin` and
/// `Host` agree, both naming the hostile host. The panel, the login and the WebSocket refuse
/// every host the server is not reached by (421) before looking at anything else; loopback
/// names are served.
#[tokio::test]
async fn a_rebound_host_name_reaches_no_page_login_or_websocket() {
    let rig = Rig::start().await;
    let port = rig.http.port();
    let body = json!({"user": "guest", "password": ""}).to_string();
    let requests = |host: &str| {
        [
            format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
            format!(
                "POST /api/login HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
            format!(
                "GET /ws HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\nUpgrade: websocket\r\n\
                 Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
                 Sec-WebSocket-Version: 13\r\n\r\n"
            ),
        ]
    };
    for host in [
        format!("evil.example:{port}"),
        format!("10.9.8.7:{port}"),
        format!("localhost.:{port}"),
    ] {
        for request in requests(&host) {
            let first = request.lines().next().unwrap_or_default().to_owned();
            assert_eq!(raw_status(rig.http, &request).await, 421, "{host}: {first}");
        }
    }
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let [page, login, upgrade] = requests(&host);
        assert_eq!(raw_status(rig.http, &page).await, 200, "{host}");
        assert_eq!(raw_status(rig.http, &login).await, 200, "{host}");
        assert_eq!(raw_status(rig.http, &upgrade).await, 101, "{host}");
    }
    rig.stop().await;
}

/// Guesses at one account, each followed by a good login of another the attacker knows (the
/// demo's passwordless guest), through every door in turn: the guesses still add up to a
/// lockout, for every door.
#[tokio::test]
async fn a_known_accounts_logins_between_guesses_never_clear_the_guesses() {
    let rig = Rig::throttled(3).await;
    // A wrong password for ada at /api/login, then guest logs in over TCP.
    assert_eq!(rig.login("ada", "guess 1").await.0, 401);
    RawConnection::guest(rig.tcp).await;
    // A wrong one over a WebSocket's Hello, then guest logs in at /api/login.
    let mut ws = rig.socket(None).await;
    assert_error(
        &ws.hello("ada", "guess 2").await,
        "ERROR_CODE_LOGIN_FAILED",
        "wrong password",
    );
    assert_eq!(rig.login("guest", "").await.0, 200);
    // The third: now locked out, whichever door and whichever account.
    assert_eq!(rig.login("ada", "guess 3").await.0, 401);
    assert_eq!(rig.login("guest", "").await.0, 429);
    let mut ws = rig.socket(None).await;
    assert_eq!(
        error_code(&ws.hello("guest", "").await),
        "ERROR_CODE_LOGIN_THROTTLED"
    );
    rig.stop().await;
}

/// The browser login reads a few KiB before anyone is known: a larger body is 413 at once
/// when its length is declared, and as soon as it passes the limit when it is not.
#[tokio::test]
async fn a_login_body_past_a_few_kib_is_413_and_not_read_further() {
    let rig = Rig::start().await;
    let host = rig.http.to_string();
    for path in ["/api/login", "/api/logout"] {
        let declared = format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\n\
             Content-Type: application/json\r\nContent-Length: 1048576\r\n\r\n"
        );
        assert_eq!(raw_status(rig.http, &declared).await, 413, "{path}, declared");
        let chunk = "x".repeat(8192);
        let chunked = format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\n\
             Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n",
            chunk.len()
        );
        assert_eq!(raw_status(rig.http, &chunked).await, 413, "{path}, chunked");
    }
    // A login of ordinary size is read and answered.
    assert_eq!(rig.login("ada", PASSWORD).await.0, 200);
    rig.stop().await;
}

/// Asserts the upgrade is refused with 503 and a body that says `saying`.
async fn assert_upgrade_refused(rig: &Rig, saying: &str) {
    let origin = rig.origin();
    match rig.socket_with(&[("Origin", origin.as_str())]).await {
        Err(tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 503);
            let body = String::from_utf8_lossy(response.body().as_deref().unwrap_or_default()).into_owned();
            assert!(body.contains(saying), "{body}");
        }
        Err(other) => panic!("refused otherwise: {other}"),
        Ok(_) => panic!("upgraded past the share"),
    }
}

/// Logged-in WebSockets (any valid login will do, the demo's guest) hold at most their share
/// of the display slots: the rest stay for TCP display clients, which log in and are served.
#[tokio::test]
async fn websockets_never_take_the_slots_tcp_display_clients_need() {
    let rig = Rig::start_with(Solution::demo(), ServerConfig::default().with_max_connections(16)).await;
    let mut sockets = Vec::new();
    for _ in 0..8 {
        let mut ws = rig.socket(None).await;
        assert_eq!(ws.hello("guest", "").await["hello"]["userName"], "guest");
        sockets.push(ws);
    }
    assert_upgrade_refused(
        &rig,
        "too many WebSockets (limit 8; the rest of the connections are kept for TCP",
    )
    .await;
    let mut tcp = Vec::new();
    for call in 0..8_u64 {
        let mut connection = RawConnection::guest(rig.tcp).await;
        connection
            .send(2, tserver_proto::v1::client_frame::Body::Ping(Default::default()))
            .await;
        let pong = connection.receive().await.expect("a pong");
        assert!(
            matches!(pong.body, Some(tserver_proto::v1::server_frame::Body::Pong(_))),
            "TCP client {call}: {pong:?}"
        );
        tcp.push(connection);
    }
    for ws in &mut sockets {
        ws.pings().await;
    }
    rig.stop().await;
}

/// One address, and one user, hold only their own share of the WebSockets; a place comes back
/// when its WebSocket closes.
#[tokio::test]
async fn websockets_are_capped_per_address_and_per_user() {
    let limits = tserver::WebSocketLimits {
        total: 10,
        per_address: 3,
        per_user: 2,
    };
    let rig = Rig::start_with(
        Solution::demo(),
        ServerConfig::default().with_websocket_limits(limits),
    )
    .await;
    let mut first = rig.socket(None).await;
    assert_eq!(first.hello("ada", PASSWORD).await["hello"]["userName"], "ada");
    let mut second = rig.socket(None).await;
    assert_eq!(second.hello("ADA", PASSWORD).await["hello"]["userName"], "ada");
    let mut third = rig.socket(None).await;
    assert_error(
        &third.hello("ada", PASSWORD).await,
        "ERROR_CODE_BUSY",
        "too many WebSockets logged in as this user (limit 2)",
    );
    assert_eq!(third.receive().await, None, "closed after the refusal");
    // The third's place came back with its close; a fourth fills the address's share.
    let mut fourth = tokio::time::timeout(PATIENCE, async {
        loop {
            let origin = rig.origin();
            if let Ok(socket) = rig.socket_with(&[("Origin", origin.as_str())]).await {
                return socket;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the closed WebSocket's place comes back");
    assert_eq!(fourth.hello("guest", "").await["hello"]["userName"], "guest");
    assert_upgrade_refused(&rig, "too many WebSockets from this address (limit 3)").await;
    // Logging out gives the user's place back.
    let bye = first.call(json!({"callId": "7", "logout": {}})).await;
    assert_eq!(bye["callId"], "7", "{bye}");
    let again = second.call(json!({"callId": "8", "logout": {}})).await;
    assert_eq!(again["callId"], "8", "{again}");
    assert_eq!(first.hello("ada", PASSWORD).await["hello"]["userName"], "ada");
    rig.stop().await;
}

/// Logging out ends the WebSockets the cookie logged in, at once, with the reason; a WebSocket
/// logged in by password is not touched.
#[tokio::test]
async fn logging_out_ends_the_websockets_the_cookie_logged_in() {
    let rig = Rig::start().await;
    let cookie = rig.cookie().await;
    let mut by_cookie = rig.socket(Some(&cookie)).await;
    assert_eq!(by_cookie.hello("", "").await["hello"]["userName"], "ada");
    by_cookie.pings().await;
    let mut by_password = rig.socket(Some(&cookie)).await;
    assert_eq!(
        by_password.hello("ada", PASSWORD).await["hello"]["userName"],
        "ada"
    );
    assert_eq!(rig.logout(&cookie).await.status(), 204);
    let last = by_cookie.last_words().await.expect("told why");
    assert_error(&last, "ERROR_CODE_UNAUTHENTICATED", "the browser login ended");
    by_password.pings().await;
    rig.stop().await;
}

/// Each login adds a row; a user keeps at most 32, the oldest ended first, so logins in a loop
/// (a passwordless user's cost nothing) never grow the table past the cap.
#[tokio::test]
async fn logins_in_a_loop_keep_at_most_the_cap_per_user() {
    let rig = Rig::start().await;
    let first = rig.cookie().await;
    for _ in 0..40 {
        assert_eq!(rig.login("ada", PASSWORD).await.0, 200);
    }
    for _ in 0..5 {
        assert_eq!(rig.login("guest", "").await.0, 200);
    }
    let count = |user: &str| -> i64 {
        rusqlite::Connection::open(rig.path())
            .expect("opens")
            .query_row(
                "SELECT count(*) FROM BrowserSessions WHERE User = ?1",
                [user],
                |row| row.get(0),
            )
            .expect("counts")
    };
    assert_eq!(count("ada"), 32);
    assert_eq!(count("guest"), 5);
    assert_eq!(rig.me(&first).await, 401, "the oldest login ended");
    rig.stop().await;
}

/// A browser login's check waits on the solution file off the async workers: with the file
/// locked by another writer, a TCP client is answered while the check still waits (the test's
/// runtime has one thread, which the check would otherwise hold).
#[tokio::test]
async fn a_browser_login_waiting_on_a_locked_file_holds_no_async_worker() {
    let rig = Rig::start().await;
    let cookie = rig.cookie().await;
    let mut tcp = RawConnection::guest(rig.tcp).await;
    let lock = rusqlite::Connection::open(rig.path()).expect("opens");
    lock.execute_batch("BEGIN EXCLUSIVE").expect("locks the file");
    let me = tokio::spawn(me_at(rig.origin(), cookie.clone()));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    tcp.send(2, tserver_proto::v1::client_frame::Body::Ping(Default::default()))
        .await;
    let pong = tcp.receive().await.expect("a pong");
    assert!(matches!(
        pong.body,
        Some(tserver_proto::v1::server_frame::Body::Pong(_))
    ));
    assert!(!me.is_finished(), "the login check still waits for the file");
    lock.execute_batch("COMMIT").expect("unlocks");
    assert_eq!(me.await.expect("no panic"), 200);
    rig.stop().await;
}

/// A raw WebSocket upgraded on `http` from a page of the server, its handshake read.
async fn raw_websocket(http: SocketAddr) -> TcpStream {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = TcpStream::connect(http).await.expect("connects");
    let request = format!(
        "GET /ws HTTP/1.1\r\nHost: {http}\r\nOrigin: http://{http}\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("sends");
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0_u8; 1];
        tokio::time::timeout(PATIENCE, stream.read_exact(&mut byte))
            .await
            .expect("the handshake in time")
            .expect("a byte");
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    stream
}

/// The close code of the close frame the server sends next, if it sends one before the
/// connection ends.
async fn close_code_received(stream: &mut TcpStream) -> Option<u16> {
    use tokio::io::AsyncReadExt as _;
    let mut header = [0_u8; 2];
    tokio::time::timeout(PATIENCE, stream.read_exact(&mut header))
        .await
        .expect("an answer in time")
        .ok()?;
    assert_eq!(header[0] & 0x0f, 0x8, "a close frame: {header:?}");
    let len = usize::from(header[1] & 0x7f);
    let mut payload = vec![0_u8; len];
    stream.read_exact(&mut payload).await.ok()?;
    Some(u16::from_be_bytes([payload[0], payload[1]]))
}

/// A masked client frame: `first` (FIN, reserved bits, opcode), then the payload masked.
fn masked_frame(first: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x37_u8, 0xfa, 0x21, 0x3d];
    let mut frame = vec![first];
    match payload.len() {
        len @ 0..=125 => frame.push(0x80 | u8::try_from(len).expect("small")),
        len => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&u16::try_from(len).expect("small").to_be_bytes());
        }
    }
    frame.extend_from_slice(&mask);
    frame.extend(
        payload
            .iter()
            .enumerate()
            .map(|(index, byte)| byte ^ mask[index % 4]),
    );
    frame
}

/// A client that breaks the WebSocket protocol is told so with a close frame and the code RFC
/// 6455 gives the fault, not dropped without a word.
#[tokio::test]
async fn a_websocket_protocol_error_is_answered_with_a_close_and_its_code() {
    use tokio::io::AsyncWriteExt as _;
    let rig = Rig::start().await;
    let unmasked = [0x81_u8, 0x02, b'h', b'i'];
    let cases: [(&str, Vec<u8>, u16); 5] = [
        ("text that is not UTF-8", masked_frame(0x81, &[0xc3, 0x28]), 1007),
        ("an unmasked frame", unmasked.to_vec(), 1002),
        ("a reserved bit set", masked_frame(0x81 | 0x40, b"hi"), 1002),
        ("an unknown opcode", masked_frame(0x83, b"hi"), 1002),
        ("a ping over 125 bytes", masked_frame(0x89, &[b'p'; 130]), 1002),
    ];
    for (what, bytes, code) in cases {
        let mut stream = raw_websocket(rig.http).await;
        stream.write_all(&bytes).await.expect("sends");
        assert_eq!(close_code_received(&mut stream).await, Some(code), "{what}");
    }
    rig.stop().await;
}

/// The next frame the server sends, whole: its FIN bit, opcode and payload (server frames are
/// never masked).
async fn server_frame(stream: &mut TcpStream) -> (bool, u8, Vec<u8>) {
    use tokio::io::AsyncReadExt as _;
    let mut header = [0_u8; 2];
    tokio::time::timeout(PATIENCE, stream.read_exact(&mut header))
        .await
        .expect("a frame in time")
        .expect("a frame header");
    assert_eq!(header[1] & 0x80, 0, "a server frame is not masked");
    let len = match header[1] & 0x7f {
        126 => {
            let mut len = [0_u8; 2];
            stream.read_exact(&mut len).await.expect("a length");
            usize::from(u16::from_be_bytes(len))
        }
        127 => {
            let mut len = [0_u8; 8];
            stream.read_exact(&mut len).await.expect("a length");
            usize::try_from(u64::from_be_bytes(len)).expect("a length that fits")
        }
        len => usize::from(len),
    };
    let mut payload = vec![0_u8; len];
    stream.read_exact(&mut payload).await.expect("the payload");
    (header[0] & 0x80 != 0, header[0] & 0x0f, payload)
}

/// A reply larger than a few KiB goes as one message in fragments of at most 4 KiB (so no
/// socket keeps a buffer the size of its largest reply); joined, they are the reply, and a
/// small reply still goes whole.
#[tokio::test]
async fn a_large_reply_goes_in_fragments_of_4_kib_and_joins_into_one_message() {
    use tokio::io::AsyncWriteExt as _;
    let rig = Rig::start().await;
    let mut stream = raw_websocket(rig.http).await;
    let hello = json!({"callId": "1", "hello": {"protocolVersion": 1, "clientName": "fragments", "userName": "guest", "password": ""}});
    stream
        .write_all(&masked_frame(0x81, hello.to_string().as_bytes()))
        .await
        .expect("sends");
    let (fin, opcode, payload) = server_frame(&mut stream).await;
    assert_eq!((fin, opcode), (true, 0x1), "a small reply goes whole, as text");
    let reply: Value = serde_json::from_slice(&payload).expect("JSON");
    assert!(reply["hello"].is_object(), "{reply}");

    let names: Vec<&str> = vec!["Pump1.MotorCurrent"; 200];
    let read = json!({"callId": "2", "readTags": {"names": names}});
    stream
        .write_all(&masked_frame(0x81, read.to_string().as_bytes()))
        .await
        .expect("sends");
    let mut message = Vec::new();
    let mut frames = Vec::new();
    loop {
        let (fin, opcode, payload) = server_frame(&mut stream).await;
        frames.push((opcode, payload.len()));
        message.extend_from_slice(&payload);
        if fin {
            break;
        }
    }
    assert!(message.len() > 3 * 4096, "a large reply: {} bytes", message.len());
    assert_eq!(frames[0].0, 0x1, "the first fragment says text: {frames:?}");
    assert!(
        frames[1..].iter().all(|(opcode, _)| *opcode == 0x0),
        "the rest continue it: {frames:?}"
    );
    assert!(
        frames.iter().all(|(_, len)| *len <= 4096),
        "each at most 4 KiB: {frames:?}"
    );
    let reply: Value = serde_json::from_slice(&message).expect("the fragments join into JSON");
    assert_eq!(reply["callId"], "2");
    assert_eq!(
        reply["readTags"]["readings"].as_array().map(Vec::len),
        Some(200),
        "{reply}"
    );
    rig.stop().await;
}
