//! RuntimeMCP over Streamable HTTP with a real MCP client (rmcp): the runtime tools listed and
//! called with a bearer token, answering what the framed protocol and a chat turn answer; the
//! gates read at every request; tokens missing, wrong, revoked or expired refused with 401;
//! a foreign Host refused; an unknown or idle-expired session told to start again (404);
//! sessions past their cap refused (503); a session answering only the token that opened it
//! (any other gets the 404 of an unknown session); every request answered when ids are
//! reused; HTTPS with the TCP listener's certificate.

use std::net::SocketAddr;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use tserver::ServerConfig;
use tserver::http_surface::{HttpConfig, serve};

use crate::support::{Solution, TestServer, admin};

/// A demo solution served on the framed protocol and over HTTP, with a token for `guest`.
pub(crate) struct McpRig {
    solution: Solution,
    pub(crate) server: TestServer,
    pub(crate) http: SocketAddr,
    token: String,
    /// `Authorization`'s value with the token.
    pub(crate) bearer: String,
    stop_http: CancellationToken,
}

impl McpRig {
    async fn start() -> Self {
        Self::start_with(HttpConfig::default()).await
    }

    pub(crate) async fn start_with(config: HttpConfig) -> Self {
        Self::serving(Solution::demo(), config).await
    }

    /// The rig around `solution`, prepared already.
    pub(crate) async fn serving(solution: Solution, config: HttpConfig) -> Self {
        let path = solution.path.to_str().expect("utf-8").to_owned();
        let token = admin(
            &["tokens", &path, "create", "--user", "guest", "--name", "test"],
            "",
        )
        .trim()
        .to_owned();
        let server = TestServer::start(&solution.path, ServerConfig::default()).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let http = listener.local_addr().expect("address");
        let stop_http = CancellationToken::new();
        tokio::spawn(serve(listener, server.runtime.clone(), config, stop_http.clone()));
        Self {
            solution,
            server,
            http,
            bearer: format!("Bearer {token}"),
            token,
            stop_http,
        }
    }

    /// The bearer token, as a client configures it.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.http.port())
    }

    pub(crate) fn path(&self) -> String {
        self.solution.path.to_str().expect("utf-8").to_owned()
    }

    pub(crate) async fn client(&self) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
        self.client_with(()).await
    }

    /// A client whose notifications go to `handler`.
    pub(crate) async fn client_with<H: rmcp::ClientHandler>(
        &self,
        handler: H,
    ) -> rmcp::service::RunningService<rmcp::RoleClient, H> {
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(self.url()).auth_header(self.token.clone()),
        );
        handler
            .serve(transport)
            .await
            .expect("the MCP client initializes")
    }

    /// One raw HTTP/1.1 POST to /mcp: the status and the whole response.
    async fn post(&self, host: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        let stream = tokio::net::TcpStream::connect(self.http).await.expect("connects");
        let mut request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        // Writing and reading at once: the server may answer (413) before it has read all.
        let (mut reader, mut writer) = stream.into_split();
        let writing = tokio::spawn(async move {
            let _ = writer.write_all(request.as_bytes()).await;
            writer
        });
        let mut response = String::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            reader.read_to_string(&mut response),
        )
        .await
        .expect("answered within 10 s")
        .expect("reads");
        drop(writing.await);
        let status = response
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .expect("a status line");
        (status, response)
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.http.port())
    }

    /// Opens a session by hand (initialize, then the `initialized` notification): its id.
    async fn open_session(&self) -> Result<String, (u16, String)> {
        let (status, response) = self
            .post(&self.host(), &[("Authorization", &self.bearer)], INITIALIZE)
            .await;
        if status != 200 {
            return Err((status, response));
        }
        let session = header(&response, "mcp-session-id").expect("a session id");
        let (status, response) = self
            .post(&self.host(), &self.in_session(&session), INITIALIZED)
            .await;
        assert_eq!(status, 202, "{response}");
        Ok(session)
    }

    /// Headers of a request in `session`.
    fn in_session<'a>(&'a self, session: &'a str) -> [(&'a str, &'a str); 3] {
        [
            ("Authorization", &self.bearer),
            ("Mcp-Session-Id", session),
            ("MCP-Protocol-Version", "2025-06-18"),
        ]
    }

    pub(crate) async fn stop(self) {
        self.stop_http.cancel();
        self.server.stop().await;
    }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

/// A header's value in a raw HTTP response.
fn header(response: &str, name: &str) -> Option<String> {
    let head = response.split("\r\n\r\n").next()?;
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim()
            .eq_ignore_ascii_case(name)
            .then(|| value.trim().to_owned())
    })
}

pub(crate) fn arguments(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    }
}

/// The text of a tool result's one content block, as JSON.
pub(crate) fn content_of(result: &rmcp::model::CallToolResult) -> Value {
    let text = result.content[0].as_text().expect("a text block").text.clone();
    serde_json::from_str(&text).expect("canonical JSON content")
}

#[tokio::test]
async fn an_mcp_client_lists_and_calls_the_runtime_tools_as_chat_and_the_framed_protocol_do() {
    let rig = McpRig::start().await;
    let client = rig.client().await;
    let tools = client.list_all_tools().await.expect("listed");
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(
        names.len(),
        16,
        "the demo's 0xDE: read tools and proposals: {names:?}"
    );
    assert_eq!(names[0], "runtime_get_value");
    let read_only = |tool: &rmcp::model::Tool| tool.annotations.as_ref().and_then(|a| a.read_only_hint);
    assert!(
        tools
            .iter()
            .filter(|tool| !tool.name.starts_with("runtime_propose_"))
            .all(|tool| read_only(tool) == Some(true)),
        "every runtime tool but the proposals says it only reads"
    );
    // Each has a title, and declares its content: the canonical success around its result.
    for tool in &tools {
        assert!(
            tool.title.as_deref().is_some_and(|title| !title.is_empty()),
            "{}",
            tool.name
        );
        let schema = tool.output_schema.as_ref().expect("an output schema");
        assert_eq!(schema["required"], json!(["ok", "result"]), "{}", tool.name);
        let hints = tool.annotations.as_ref().expect("annotations");
        assert_eq!(
            hints.destructive_hint,
            Some(false),
            "{}: nothing destroys",
            tool.name
        );
        assert_eq!(
            hints.open_world_hint,
            Some(false),
            "{}: the plant only",
            tool.name
        );
    }
    assert_eq!(tools[0].input_schema["required"], json!(["tag"]));

    let result = client
        .call_tool(
            CallToolRequestParams::new("runtime_get_value")
                .with_arguments(arguments(json!({"tag": "Tank1.Level"}))),
        )
        .await
        .expect("called");
    assert_eq!(result.is_error, Some(false));
    let over_mcp = content_of(&result);
    let framed = rig.server.guest().await;
    let over_frames = framed
        .call_tool("runtime_get_value", &json!({"tag": "Tank1.Level"}))
        .await
        .expect("called");
    let over_frames: Value = serde_json::from_str(&over_frames.content_json).expect("JSON");
    assert_eq!(over_mcp, over_frames, "the same call, the same content");
    assert_eq!(
        result.structured_content.as_ref(),
        Some(&over_mcp),
        "the structured content is the content's JSON"
    );

    let unknown = client
        .call_tool(CallToolRequestParams::new("runtime_launch_rocket"))
        .await
        .expect("answered");
    assert_eq!(unknown.is_error, Some(true));
    assert_eq!(content_of(&unknown)["error"]["type"], "unknown_tool");
    assert_eq!(unknown.structured_content, None, "a refusal declares no result");
    let bad = client
        .call_tool(
            CallToolRequestParams::new("runtime_get_value").with_arguments(arguments(json!({"tag": 1}))),
        )
        .await
        .expect("answered");
    assert_eq!(content_of(&bad)["error"]["type"], "invalid_arguments");

    // The gates are read at every request.
    admin(&["settings", &rig.path(), "set", "ModelOptions", "0x06"], "");
    let uns_only = client.list_all_tools().await.expect("listed");
    assert!(uns_only.iter().all(|tool| !tool.name.contains("alarm")));
    admin(&["settings", &rig.path(), "set", "ModelOptions", "0x1c"], "");
    let disabled = client.list_all_tools().await.expect_err("disabled");
    assert!(disabled.to_string().contains("bit 0x02"), "{disabled}");
    client.cancel().await.expect("closes");
    rig.stop().await;
}

#[tokio::test]
async fn requests_without_a_valid_token_or_from_a_foreign_host_are_refused() {
    let rig = McpRig::start().await;
    let host = format!("127.0.0.1:{}", rig.http.port());
    let bearer = format!("Bearer {}", rig.token);

    let (status, response) = rig.post(&host, &[], INITIALIZE).await;
    assert_eq!(status, 401, "{response}");
    assert!(
        response
            .to_ascii_lowercase()
            .contains("www-authenticate: bearer realm=\"tserver\""),
        "{response}"
    );
    let (status, response) = rig
        .post(&host, &[("Authorization", "Bearer tst_0000_0000")], INITIALIZE)
        .await;
    assert_eq!(status, 401);
    assert!(response.contains("error=\"invalid_token\""), "{response}");

    let (status, response) = rig.post(&host, &[("Authorization", &bearer)], INITIALIZE).await;
    assert_eq!(status, 200, "{response}");
    // The scheme's name is case-insensitive.
    let shouted = format!("BEARER {}", rig.token);
    let (status, response) = rig.post(&host, &[("Authorization", &shouted)], INITIALIZE).await;
    assert_eq!(status, 200, "{response}");
    let (status, response) = rig
        .post("evil.example", &[("Authorization", &bearer)], INITIALIZE)
        .await;
    assert_eq!(status, 403, "DNS rebinding: {response}");
    // A browser page may call only from a page on an allowed host.
    let (status, response) = rig
        .post(
            &host,
            &[("Authorization", &bearer), ("Origin", "http://evil.example")],
            INITIALIZE,
        )
        .await;
    assert_eq!(status, 403, "a foreign page: {response}");
    // Any port of an allowed host, the scheme's default included.
    for origin in ["http://localhost:5173", "https://localhost"] {
        let (status, response) = rig
            .post(
                &host,
                &[("Authorization", &bearer), ("Origin", origin)],
                INITIALIZE,
            )
            .await;
        assert_eq!(status, 200, "a page on an allowed host ({origin}): {response}");
    }
    // A body past 4 MiB is refused whole.
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{{"pad":"{}"}}}}"#,
        "x".repeat(4 * 1024 * 1024 + 1)
    );
    let (status, _) = rig.post(&host, &[("Authorization", &bearer)], &huge).await;
    assert_eq!(status, 413, "a body past the limit");
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let (status, response) = rig
        .post(
            &host,
            &[("Authorization", &bearer), ("Mcp-Session-Id", "no-such-session")],
            list,
        )
        .await;
    assert_eq!(status, 404, "an unknown session starts again: {response}");

    // A verified token is remembered for a second: the revoke is seen within it.
    admin(&["tokens", &rig.path(), "revoke", "test"], "");
    let deadline = tokio::time::Instant::now() + crate::support::PATIENCE;
    let mut status = 200;
    while status != 401 && tokio::time::Instant::now() < deadline {
        status = rig.post(&host, &[("Authorization", &bearer)], INITIALIZE).await.0;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, 401, "revoked");
    assert!(!response.contains(&rig.token), "a token is never echoed");
    rig.stop().await;
}

#[tokio::test]
async fn an_expired_token_is_refused_saying_so() {
    let rig = McpRig::start().await;
    let expired = {
        let db = store::Store::open_file(&rig.solution.path).expect("opens");
        let (_, text) = db
            .create_token("guest", "short", Some(std::time::Duration::from_millis(1)))
            .await
            .expect("made");
        text
    };
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let host = format!("127.0.0.1:{}", rig.http.port());
    let (status, response) = rig
        .post(
            &host,
            &[("Authorization", &format!("Bearer {expired}"))],
            INITIALIZE,
        )
        .await;
    assert_eq!(status, 401);
    assert!(response.contains("the token has expired"), "{response}");
    rig.stop().await;
}

#[tokio::test]
async fn a_token_past_its_requests_per_second_is_told_to_wait() {
    let rig = McpRig::start_with(HttpConfig {
        requests_per_second: 3,
        ..HttpConfig::default()
    })
    .await;
    let host = format!("127.0.0.1:{}", rig.http.port());
    let bearer = format!("Bearer {}", rig.token);
    let mut statuses = Vec::new();
    // Three a second are allowed: the fourth within the window is refused. (A window that
    // turns over between requests on a very slow machine only moves the refusal later.)
    for _ in 0..8 {
        let (status, response) = rig.post(&host, &[("Authorization", &bearer)], INITIALIZE).await;
        statuses.push(status);
        if status == 429 {
            assert!(
                response.to_ascii_lowercase().contains("retry-after: 1"),
                "{response}"
            );
            break;
        }
        assert_eq!(status, 200, "{response}");
    }
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    assert!(statuses.len() >= 4, "at least three allowed first: {statuses:?}");
    rig.stop().await;
}

#[tokio::test]
async fn tclient_mcp_bridges_stdio_to_a_running_server_under_its_login() {
    use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
    let rig = McpRig::start().await;
    let addr = rig.server.addr.to_string();
    let bridge = TokioChildProcess::new(
        tokio::process::Command::new(env!("CARGO_BIN_EXE_tclient-under-test")).configure(|command| {
            command.args(["--addr", &addr, "--user", "guest", "mcp"]);
        }),
    )
    .expect("tclient starts");
    let client = ().serve(bridge).await.expect("the bridge initializes");
    let tools = client.list_all_tools().await.expect("listed");
    assert_eq!(tools.len(), 16);
    assert_eq!(
        tools[0].annotations.as_ref().and_then(|a| a.read_only_hint),
        Some(true)
    );
    let result = client
        .call_tool(
            CallToolRequestParams::new("runtime_get_value")
                .with_arguments(arguments(json!({"tag": "Tank1.Level"}))),
        )
        .await
        .expect("called");
    let framed = rig.server.guest().await;
    let direct = framed
        .call_tool("runtime_get_value", &json!({"tag": "Tank1.Level"}))
        .await
        .expect("called");
    let direct: Value = serde_json::from_str(&direct.content_json).expect("JSON");
    assert_eq!(content_of(&result), direct, "the bridge adds nothing");
    admin(&["settings", &rig.path(), "set", "ModelOptions", "0x1c"], "");
    let disabled = client.list_all_tools().await.expect_err("disabled");
    assert!(disabled.to_string().contains("bit 0x02"), "{disabled}");
    client.cancel().await.expect("closes");
    rig.stop().await;
}

/// Every runtime tool with arguments it answers without a failure (history windows fixed in
/// the past, so two calls read the same samples).
pub(crate) fn every_tool_call() -> Vec<(&'static str, Value)> {
    let end = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    let start = end - std::time::Duration::from_secs(2 * 3600);
    let (start, end) = (
        humantime::format_rfc3339_seconds(start).to_string(),
        humantime::format_rfc3339_seconds(end).to_string(),
    );
    vec![
        ("runtime_get_value", json!({"tag": "Tank1.Level"})),
        ("runtime_browse_object_model", json!({"path": "Plant/Area1"})),
        ("runtime_search_uns", json!({"query": "pump current"})),
        ("runtime_describe_object", json!({"path": "Plant/Area1/Pump1"})),
        ("runtime_list_instances", json!({"name_mask": "Pump*"})),
        (
            "runtime_search_documents",
            json!({"query": "motor current", "equipment": "Pump1"}),
        ),
        ("runtime_get_active_alarms", json!({})),
        ("runtime_query_alarm_history", json!({"start": start, "end": end})),
        ("runtime_get_alarm_report", json!({"start": start, "end": end})),
        (
            "runtime_get_tag_history",
            json!({"tag": "Tank1.Level", "start": start, "end": end}),
        ),
        (
            "runtime_find_excursions",
            json!({"tag": "Tank1.Level", "above": 60, "start": start, "end": end}),
        ),
        (
            "runtime_get_values_at",
            json!({"tags": ["Tank1.Level", "Pump1.Mode"], "time": end}),
        ),
    ]
}

#[tokio::test]
async fn every_runtime_tool_answers_over_mcp_what_it_answers_over_the_framed_protocol() {
    // The read tools (0x9E): a proposal's answer names a proposal of its own each time.
    let solution = Solution::demo();
    admin(
        &[
            "settings",
            solution.path.to_str().expect("utf-8"),
            "set",
            "ModelOptions",
            "0x9e",
        ],
        "",
    );
    let rig = McpRig::serving(solution, HttpConfig::default()).await;
    let client = rig.client().await;
    let framed = rig.server.guest().await;
    let calls = every_tool_call();
    let listed = client.list_all_tools().await.expect("listed");
    assert_eq!(listed.len(), calls.len(), "the test calls every tool listed");
    for (name, args) in calls {
        let result = client
            .call_tool(CallToolRequestParams::new(name).with_arguments(arguments(args.clone())))
            .await
            .expect("called");
        let over_mcp = content_of(&result);
        assert_eq!(result.is_error, Some(false), "{name}: {over_mcp}");
        assert!(over_mcp.get("ok").is_some(), "{name}: {over_mcp}");
        let direct = framed.call_tool(name, &args).await.expect("called");
        let direct: Value = serde_json::from_str(&direct.content_json).expect("JSON");
        assert_eq!(over_mcp, direct, "{name}: the same call, the same content");
    }
    client.cancel().await.expect("closes");
    rig.stop().await;
}

#[tokio::test]
async fn the_category_bits_decide_which_tools_are_listed_and_callable() {
    let rig = McpRig::start().await;
    let client = rig.client().await;
    let all: Vec<&str> = every_tool_call().into_iter().map(|(name, _)| name).collect();
    let (uns, rest) = all.split_at(6);
    let (alarms, history) = rest.split_at(3);
    for (options, offered) in [
        ("0x06", uns.to_vec()),
        ("0x0a", alarms.to_vec()),
        ("0x12", history.to_vec()),
        ("0x1e", all.clone()),
        ("0x02", Vec::new()),
    ] {
        admin(&["settings", &rig.path(), "set", "ModelOptions", options], "");
        let listed = client.list_all_tools().await.expect("listed");
        let names: Vec<&str> = listed.iter().map(|tool| tool.name.as_ref()).collect();
        assert_eq!(names, offered, "ModelOptions {options}");
        for (name, args) in every_tool_call() {
            let result = client
                .call_tool(CallToolRequestParams::new(name).with_arguments(arguments(args)))
                .await
                .expect("answered");
            let content = content_of(&result);
            if offered.contains(&name) {
                assert_eq!(result.is_error, Some(false), "{options} {name}: {content}");
            } else {
                assert_eq!(result.is_error, Some(true), "{options} {name}: {content}");
                assert_eq!(content["error"]["type"], "unknown_tool", "{options} {name}");
            }
        }
    }
    client.cancel().await.expect("closes");
    rig.stop().await;
}

#[tokio::test]
async fn an_idle_session_ends_and_its_id_is_then_told_to_start_again() {
    let rig = McpRig::start_with(HttpConfig {
        session_idle: std::time::Duration::from_millis(500),
        ..HttpConfig::default()
    })
    .await;
    let session = rig.open_session().await.expect("opens");
    let (status, response) = rig.post(&rig.host(), &rig.in_session(&session), LIST).await;
    assert_eq!(status, 200, "a live session answers: {response}");
    assert!(response.contains("runtime_get_value"), "{response}");
    // Silent for longer than its limit (500 ms): the session has ended. (Retried, so that a
    // machine too slow to keep the sleep short of the deadline still sees the end.)
    let deadline = tokio::time::Instant::now() + crate::support::PATIENCE;
    let mut status = 200;
    while status == 200 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(750)).await;
        status = rig.post(&rig.host(), &rig.in_session(&session), LIST).await.0;
    }
    assert_eq!(status, 404, "an expired session starts again");
    rig.open_session().await.expect("a new session opens");
    rig.stop().await;
}

/// A session the server no longer knows (ended idle here; on several nodes, held by a node that
/// went away) is answered 404 with a JSON-RPC error saying to start again, and rmcp's client
/// starts a new one by itself: its caller sees every call answered.
#[tokio::test]
async fn a_client_whose_session_is_gone_goes_on_in_a_new_one_told_why() {
    let rig = McpRig::start_with(HttpConfig {
        session_idle: std::time::Duration::from_millis(300),
        ..HttpConfig::default()
    })
    .await;
    let client = rig.client().await;
    let call = || {
        client.call_tool(
            CallToolRequestParams::new("runtime_get_value")
                .with_arguments(arguments(json!({"tag": "Tank1.Level"}))),
        )
    };
    assert_eq!(call().await.expect("answered").is_error, Some(false));
    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
    let again = call().await.expect("answered in a new session");
    assert_eq!(again.is_error, Some(false));
    // What a client that does not start again by itself reads.
    let (status, response) = rig
        .post(
            &rig.host(),
            &rig.in_session("0123456789abcdef0123456789abcdef"),
            LIST,
        )
        .await;
    assert_eq!(status, 404);
    let body = response.split("\r\n\r\n").nth(1).expect("a body");
    // The JSON, whether the body came whole or in chunks.
    let json_text = &body[body.find('{').expect("JSON")..=body.rfind('}').expect("JSON")];
    let body: Value = serde_json::from_str(json_text).expect("JSON-RPC");
    assert_eq!(body["id"], 2, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|message| message.ends_with("initialize a new session")),
        "{body}"
    );
    client.cancel().await.expect("closes");
    rig.stop().await;
}

#[tokio::test]
async fn sessions_past_the_cap_are_refused_until_one_closes() {
    let rig = McpRig::start_with(HttpConfig {
        max_sessions: 2,
        ..HttpConfig::default()
    })
    .await;
    let first = rig.open_session().await.expect("opens");
    let _second = rig.client().await;
    let (status, response) = rig.open_session().await.expect_err("a third is refused");
    assert_eq!(status, 503, "{response}");
    assert!(response.contains("--http-max-sessions"), "{response}");
    assert!(header(&response, "retry-after").is_some(), "{response}");
    // Requests within open sessions go on.
    let (status, _) = rig.post(&rig.host(), &rig.in_session(&first), LIST).await;
    assert_eq!(status, 200);
    // Closing one (DELETE) makes room.
    let mut stream = tokio::net::TcpStream::connect(rig.http).await.expect("connects");
    let delete = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\nMcp-Session-Id: {first}\r\n\
         MCP-Protocol-Version: 2025-06-18\r\nConnection: close\r\n\r\n",
        rig.host(),
        rig.bearer
    );
    stream.write_all(delete.as_bytes()).await.expect("writes");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("reads");
    assert!(answer.starts_with("HTTP/1.1 2"), "{answer}");
    rig.open_session().await.expect("room again");
    rig.stop().await;
}

#[tokio::test]
async fn with_a_certificate_the_http_surface_speaks_https_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .expect("certificate");
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).expect("write cert");
    std::fs::write(&key, made.signing_key.serialize_pem()).expect("write key");
    let rig = McpRig::start_with(HttpConfig {
        tls: Some(tserver_tls::server_config(&cert, &key).expect("TLS config")),
        ..HttpConfig::default()
    })
    .await;

    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(made.cert.pem().as_bytes()).expect("PEM"))
        .build()
        .expect("client");
    let url = format!("https://localhost:{}/mcp", rig.http.port());
    let post = |body: &'static str, session: Option<String>| {
        let mut request = client
            .post(&url)
            .header("Authorization", &rig.bearer)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-06-18")
            .body(body);
        if let Some(session) = session {
            request = request.header("Mcp-Session-Id", session);
        }
        request.send()
    };
    let initialized = post(INITIALIZE, None).await.expect("HTTPS answers");
    assert_eq!(initialized.status(), 200);
    let session = initialized.headers()["mcp-session-id"]
        .to_str()
        .expect("text")
        .to_owned();
    assert!(initialized.text().await.expect("body").contains("tserver"));
    let notified = post(INITIALIZED, Some(session.clone())).await.expect("answers");
    assert_eq!(notified.status(), 202);
    let listed = post(LIST, Some(session)).await.expect("answers");
    assert_eq!(listed.status(), 200);
    assert!(listed.text().await.expect("body").contains("runtime_get_value"));

    // Plain HTTP to the HTTPS port gets no HTTP answer.
    let (plain, _) = tokio::time::timeout(crate::support::PATIENCE, async {
        let mut stream = tokio::net::TcpStream::connect(rig.http).await.expect("connects");
        stream
            .write_all(format!("POST /mcp HTTP/1.1\r\nHost: {}\r\n\r\n", rig.host()).as_bytes())
            .await
            .expect("writes");
        let mut answer = Vec::new();
        let read = stream.read_to_end(&mut answer).await;
        (answer, read)
    })
    .await
    .expect("the server closes in time");
    assert!(!plain.starts_with(b"HTTP/"), "no plain HTTP on an HTTPS port");
    rig.stop().await;
}

/// A raw HTTP/1.1 request to /mcp without a body (GET, DELETE): the status and the response.
async fn bodiless(rig: &McpRig, method: &str, bearer: &str, session: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(rig.http).await.expect("connects");
    let request = format!(
        "{method} /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: {bearer}\r\nMcp-Session-Id: {session}\r\n\
         Accept: text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\nConnection: close\r\n\r\n",
        rig.host(),
    );
    stream.write_all(request.as_bytes()).await.expect("writes");
    let mut answer = String::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_string(&mut answer),
    )
    .await
    .expect("answered within 10 s")
    .expect("reads");
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    (status, answer)
}

/// A response without its `date` header (which differs from one second to the next).
fn without_date(response: &str) -> String {
    response
        .lines()
        .filter(|line| !line.to_ascii_lowercase().starts_with("date:"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn a_session_answers_only_the_token_that_opened_it_and_others_cannot_tell_it_exists() {
    let rig = McpRig::start().await;
    let path = rig.path();
    admin(&["users", &path, "add", "viewer1"], "a-password-of-viewer1\n");
    let other = admin(&["tokens", &path, "create", "--user", "viewer1"], "")
        .trim()
        .to_owned();
    let other_bearer = format!("Bearer {other}");
    // A second token of the same user is another token too.
    let same_user = admin(&["tokens", &path, "create", "--user", "guest"], "")
        .trim()
        .to_owned();
    let same_user_bearer = format!("Bearer {same_user}");
    let session = rig.open_session().await.expect("opens");
    let unknown = "0123456789abcdef0123456789abcdef";
    // rmcp's own answer for a session that has ended, to compare with.
    let ended = rig.open_session().await.expect("opens");
    let (status, response) = bodiless(&rig, "DELETE", &rig.bearer, &ended).await;
    assert!((200..300).contains(&status), "{response}");
    let (status, ended_answer) = rig.post(&rig.host(), &rig.in_session(&ended), LIST).await;
    assert_eq!(status, 404, "{ended_answer}");

    for bearer in [&other_bearer, &same_user_bearer] {
        let headers = [
            ("Authorization", bearer.as_str()),
            ("Mcp-Session-Id", session.as_str()),
            ("MCP-Protocol-Version", "2025-06-18"),
        ];
        let (status, foreign) = rig.post(&rig.host(), &headers, LIST).await;
        assert_eq!(status, 404, "{foreign}");
        let headers = [
            ("Authorization", bearer.as_str()),
            ("Mcp-Session-Id", unknown),
            ("MCP-Protocol-Version", "2025-06-18"),
        ];
        let (status, missing) = rig.post(&rig.host(), &headers, LIST).await;
        assert_eq!(status, 404, "{missing}");
        for reference in [&missing, &ended_answer] {
            assert_eq!(
                without_date(&foreign),
                without_date(reference),
                "another's session reads exactly as one that does not exist"
            );
        }
        for method in ["GET", "DELETE"] {
            let (status, response) = bodiless(&rig, method, bearer, &session).await;
            assert_eq!(status, 404, "{method}: {response}");
        }
    }
    // The owner's session is untouched by all of that.
    let (status, response) = rig.post(&rig.host(), &rig.in_session(&session), LIST).await;
    assert_eq!(status, 200, "{response}");
    assert!(response.contains("runtime_get_value"), "{response}");
    // Its owner may end it; then it is gone for everyone.
    let (status, response) = bodiless(&rig, "DELETE", &rig.bearer, &session).await;
    assert!((200..300).contains(&status), "{response}");
    let (status, _) = rig.post(&rig.host(), &rig.in_session(&session), LIST).await;
    assert_eq!(status, 404);
    rig.stop().await;
}

/// Requests reusing one JSON-RPC id at once in one session: every one is answered, with its
/// result or, while another with the id is in flight, with an error saying the id is in use.
#[tokio::test]
async fn requests_reusing_an_id_in_one_session_are_all_answered() {
    let rig = McpRig::start().await;
    let session = rig.open_session().await.expect("opens");
    let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"runtime_get_value","arguments":{"tag":"Tank1.Level"}}}"#;
    let rounds = 10;
    let at_once = 20;
    let (mut answered, mut in_use) = (0, 0);
    let host = rig.host();
    let headers = rig.in_session(&session);
    for _ in 0..rounds {
        let requests = (0..at_once).map(|_| rig.post(&host, &headers, call));
        for (status, response) in futures::future::join_all(requests).await {
            assert_eq!(status, 200, "{response}");
            assert!(response.contains(r#""id":7"#), "{response}");
            if response.contains("already in use") {
                assert!(response.contains("-32600"), "{response}");
                in_use += 1;
            } else {
                assert!(response.contains(r#"\"ok\""#), "{response}");
                answered += 1;
            }
        }
    }
    assert_eq!(answered + in_use, rounds * at_once);
    assert!(answered >= rounds, "each round answered at least one");
    // Once answered, the id is free again.
    let (status, response) = rig.post(&rig.host(), &rig.in_session(&session), call).await;
    assert_eq!(status, 200, "{response}");
    assert!(!response.contains("already in use"), "{response}");
    // Another session may use the same id at the same time.
    let other = rig.open_session().await.expect("opens");
    let other_headers = rig.in_session(&other);
    let (first, second) = tokio::join!(
        rig.post(&host, &headers, call),
        rig.post(&host, &other_headers, call),
    );
    for (status, response) in [first, second] {
        assert_eq!(status, 200, "{response}");
        assert!(!response.contains("already in use"), "{response}");
    }
    rig.stop().await;
}
