//! Operations: `/healthz` and `/readyz` for load balancers, without a token; readiness follows
//! the TCP listener (accepting or not) and the solution (open, or gone from under the server);
//! JSON logs, one object a line with the connection's GUID and the call's id.

use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tserver::http_surface::{HttpConfig, serve};
use tserver::{Runtime, Server, ServerConfig};

use scripted_llm::{Reply, ScriptedLlm};
use service_client::{Client, ClientOptions};

use crate::support::{PATIENCE, ServerProcess, Solution, admin};
use tserver_tests::haproxy::free_loopback_addr;

/// `GET path` on `addr`: the status and the body.
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let response = reqwest::get(format!("http://{addr}{path}"))
        .await
        .expect("the HTTP surface answers");
    let status = response.status().as_u16();
    (status, response.text().await.expect("a body"))
}

/// Polls `/readyz` until its status is `wanted`; returns the body.
async fn readyz_until(addr: std::net::SocketAddr, wanted: u16) -> Value {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let (status, body) = get(addr, "/readyz").await;
        if status == wanted {
            return serde_json::from_str(&body).expect("JSON");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/readyz never answered {wanted}: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn readiness_follows_the_listener_and_the_solution_and_health_needs_no_token() {
    let solution = Solution::demo();
    let runtime = Runtime::open(&solution.path).expect("opens");
    let server = Server::new(runtime.clone(), ServerConfig::default()).expect("server");
    let http_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let http = http_listener.local_addr().expect("address");
    let stop_http = CancellationToken::new();
    let config = HttpConfig {
        accepting: Some(server.accepting()),
        ..HttpConfig::default()
    };
    tokio::spawn(serve(http_listener, runtime.clone(), config, stop_http.clone()));

    // Healthy at once, without a token; not ready while the TCP listener does not accept.
    assert_eq!(get(http, "/healthz").await, (200, "ok\n".to_owned()));
    let (status, body) = get(http, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    let body: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(body["listener"], "not accepting");
    assert_eq!(body["solution"], "open");
    // Everything else still asks for a token.
    assert_eq!(get(http, "/mcp").await.0, 401);

    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let stop_tcp = CancellationToken::new();
    let serving = tokio::spawn(server.run(tcp, stop_tcp.clone()));
    let ready = readyz_until(http, 200).await;
    assert_eq!(ready["ready"], true);
    assert_eq!(ready["listener"], "accepting");

    // A solution file removed from under the server: not ready, saying why.
    std::fs::remove_file(&solution.path).expect("removes");
    assert!(runtime.store().check_file().is_some(), "noticed");
    let gone = readyz_until(http, 503).await;
    assert!(
        gone["solution"]
            .as_str()
            .is_some_and(|text| text.contains("was removed")),
        "{gone}"
    );

    // Shutting down: the listener stops accepting.
    stop_tcp.cancel();
    serving.await.expect("stops");
    let (status, body) = get(http, "/readyz").await;
    assert_eq!(status, 503);
    assert!(body.contains("\"not accepting\""), "{body}");
    stop_http.cancel();
}

/// The demo solution with its model on, pointed at a stand-in (on `runtime`) answering `text`
/// once.
fn demo_answering(runtime: &tokio::runtime::Runtime, text: &str) -> (ScriptedLlm, Solution) {
    let llm = runtime
        .block_on(ScriptedLlm::start([Reply::text(text)]))
        .expect("llm");
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8");
    admin(&["settings", path, "set", "URL", &llm.url()], "");
    admin(&["settings", path, "set", "ModelEnabled", "true"], "");
    (llm, solution)
}

#[test]
fn json_logs_are_one_object_a_line_carrying_the_connection_guid_and_the_call_id() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (_llm, solution) = demo_answering(&runtime, "Pump 1 runs.");
    // With the HTTP listener too: a clean start and session of the whole server warn of nothing.
    let http = free_loopback_addr().to_string();
    let served = ServerProcess::start(
        &solution.path,
        &["--log-format", "json", "--http", &http],
        &[("RUST_LOG", "debug")],
    );
    runtime.block_on(async {
        let client = Client::connect(served.addr, ClientOptions::default())
            .await
            .expect("connects");
        client.login("guest", "").await.expect("logs in");
        client.ping().await.expect("pongs");
        // The chat turn logs its model request (debug) inside its call.
        client.chat("How is Pump 1?").await.expect("answers");
        client.logout().await.expect("logs out");
    });
    let deadline = std::time::Instant::now() + PATIENCE;
    let lines = loop {
        let lines = served.log().lines;
        if lines.iter().any(|line| line.contains("logged out")) {
            break lines;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never logged out: {lines:#?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let events: Vec<Value> = lines
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}")))
        .collect();
    for event in &events {
        assert!(
            event["timestamp"].is_string() && event["level"].is_string() && event["message"].is_string(),
            "{event}"
        );
    }
    let logged_in = events
        .iter()
        .find(|event| event["message"] == "logged in")
        .expect("a login line");
    let spans = logged_in["spans"].as_array().expect("spans");
    assert!(
        spans
            .iter()
            .any(|span| span["name"] == "conn" && span["guid"].as_str().is_some_and(|guid| guid.len() == 36)),
        "{logged_in}"
    );
    let warnings: Vec<&Value> = events
        .iter()
        .filter(|event| event["level"] != "DEBUG" && event["level"] != "INFO" && event["level"] != "TRACE")
        .collect();
    assert!(
        warnings.is_empty(),
        "a clean start and session warned: {warnings:#?}"
    );
    // A line logged during a call names the call.
    assert!(
        events
            .iter()
            .any(|event| event["spans"].as_array().is_some_and(|spans| spans
                .iter()
                .any(|span| span["name"] == "call" && span["call_id"].is_number()))),
        "no line carries a call id: {events:#?}"
    );
}

/// The value of the sample `series` (its name and labels as rendered) in a scrape, if present.
fn sample(scrape: &str, series: &str) -> Option<f64> {
    scrape
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

/// A tserver process of its own serving `solution` with HTTP (its recorder counts one test's
/// calls and nothing else), and a token to scrape it with.
struct ScrapedServer {
    served: ServerProcess,
    http: std::net::SocketAddr,
    token: String,
}

impl ScrapedServer {
    fn start(solution: &Solution, extra: &[&str]) -> Self {
        let path = solution.path.to_str().expect("utf-8");
        let token = admin(
            &[
                "tokens",
                path,
                "create",
                "--user",
                "guest",
                "--name",
                "prometheus",
            ],
            "",
        )
        .trim()
        .to_owned();
        let http = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|free| free.local_addr())
            .expect("a free port");
        let mut args = vec!["--http".to_owned(), http.to_string()];
        args.extend(extra.iter().map(|arg| (*arg).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Self {
            served: ServerProcess::start(&solution.path, &args, &[]),
            http,
            token,
        }
    }

    /// `GET /metrics`, with the token or without: the status and the body.
    async fn scrape(&self, with_token: bool) -> (u16, String) {
        let mut request = reqwest::Client::new().get(format!("http://{}/metrics", self.http));
        if with_token {
            request = request.bearer_auth(&self.token);
        }
        let response = request.send().await.expect("answers");
        (response.status().as_u16(), response.text().await.expect("a body"))
    }
}

#[test]
fn metrics_count_a_known_mix_of_calls_in_histograms_with_buckets() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (_llm, solution) = demo_answering(&runtime, "Pump 1 runs.");
    let scraped = ScrapedServer::start(&solution, &[]);
    let served = &scraped.served;
    let scrape = |with_token: bool| runtime.block_on(scraped.scrape(with_token));
    let (_first, _second) = runtime.block_on(async {
        let first = Client::connect(served.addr, ClientOptions::default())
            .await
            .expect("connects");
        first.login("guest", "").await.expect("logs in");
        let second = Client::connect(served.addr, ClientOptions::default())
            .await
            .expect("connects");
        second.login("guest", "").await.expect("logs in");
        let stranger = Client::connect(served.addr, ClientOptions::default())
            .await
            .expect("connects");
        stranger.login("nobody", "wrong").await.expect_err("refused");
        for _ in 0..3 {
            first.ping().await.expect("pongs");
        }
        first.read_tags(&["Pump1.MotorCurrent"]).await.expect("reads");
        let reply = first
            .call_tool(
                "runtime_get_value",
                &serde_json::json!({"tag": "Pump1.MotorCurrent"}),
            )
            .await
            .expect("answers");
        assert!(!reply.is_error, "{}", reply.content_json);
        first.chat("How is Pump 1?").await.expect("answers");
        // The stand-in's script is used up: it answers 500, an error envelope.
        first.chat("And Pump 2?").await.expect("answers");
        (first, second)
    });

    assert_eq!(scrape(false).0, 401, "metrics need a token");
    let (status, text) = scrape(true);
    assert_eq!(status, 200);
    let count = |series: &str| sample(&text, series).unwrap_or_else(|| panic!("no {series} in:\n{text}"));
    assert_eq!(count("tserver_logins_total{outcome=\"ok\"}"), 2.0);
    assert_eq!(count("tserver_logins_total{outcome=\"failed\"}"), 1.0);
    assert_eq!(count("tserver_calls_total{call=\"ping\",outcome=\"ok\"}"), 3.0);
    assert_eq!(
        count("tserver_calls_total{call=\"read_tags\",outcome=\"ok\"}"),
        1.0
    );
    assert_eq!(
        count("tserver_calls_total{call=\"call_tool\",outcome=\"ok\"}"),
        1.0
    );
    assert_eq!(count("tserver_calls_total{call=\"chat\",outcome=\"ok\"}"), 2.0);
    assert_eq!(count("tserver_model_http_errors_total{class=\"5xx\"}"), 1.0);
    assert_eq!(
        count("tserver_connections_open"),
        2.0,
        "the stranger's connection closed"
    );
    assert_eq!(
        count(
            "tserver_tool_duration_seconds_count{tool=\"runtime_get_value\",caller=\"client\",outcome=\"ok\"}"
        ),
        1.0
    );
    let model = "gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name=\"chat\",gen_ai_request_model=\"";
    for status in ["ok", "error"] {
        let ending = format!("status=\"{status}\"}} 1");
        assert!(
            text.lines()
                .any(|line| line.starts_with(model) && line.ends_with(&ending)),
            "{status}: {text}"
        );
    }
    // Histograms with the explicit buckets, never summaries.
    for bound in ["0.0001", "0.001", "0.1", "1", "120", "+Inf"] {
        let bucket = format!(
            "tserver_tool_duration_seconds_bucket{{tool=\"runtime_get_value\",caller=\"client\",outcome=\"ok\",le=\"{bound}\"}}"
        );
        assert!(sample(&text, &bucket).is_some(), "no bucket {bound}:\n{text}");
    }
    assert!(!text.contains("quantile="), "a summary:\n{text}");
    assert!(
        text.contains("# TYPE gen_ai_client_operation_duration_seconds histogram"),
        "{text}"
    );
    // Labels never carry a user, a GUID or a query.
    for private in ["guest", "nobody", "How is Pump 1", "And Pump 2"] {
        assert!(!text.contains(private), "{private} in:\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_chat_turns_by_status_the_tool_cap_the_budget_and_coalesced_updates() {
    let llm = ScriptedLlm::start([
        // Two calls where the cap allows one, then the tool-less last chance's answer.
        Reply::ToolCalls(vec![
            (
                "call_1".to_owned(),
                "runtime_get_value".to_owned(),
                r#"{"tag":"Pump1.MotorCurrent"}"#.to_owned(),
            ),
            (
                "call_2".to_owned(),
                "runtime_get_value".to_owned(),
                r#"{"tag":"Pump1.FlowRate"}"#.to_owned(),
            ),
        ]),
        Reply::text("Pump 1 runs."),
        // Later than the turn's 1 s budget.
        Reply::text("too late").after(Duration::from_secs(3)),
    ])
    .await
    .expect("llm");
    let solution = crate::operator_writes::solution_with_writable_tags();
    let path = solution.path.to_str().expect("utf-8");
    for (key, value) in [
        ("URL", llm.url().as_str()),
        ("ModelEnabled", "true"),
        ("MaxToolDispatchesPerTurn", "1"),
        ("TimeoutSeconds", "1"),
    ] {
        admin(&["settings", path, "set", key, value], "");
    }
    let scraped = ScrapedServer::start(&solution, &[]);
    let client = Client::connect(scraped.served.addr, ClientOptions::default())
        .await
        .expect("connects");
    client.login("guest", "").await.expect("logs in");

    let capped: Value =
        serde_json::from_str(&client.chat("How is Pump 1?").await.expect("answers")).expect("an envelope");
    assert_eq!(capped["status"], "ok", "{capped}");
    let late: Value =
        serde_json::from_str(&client.chat("And now?").await.expect("answers")).expect("an envelope");
    assert_eq!(late["status"], "truncated", "{late}");
    admin(&["settings", path, "set", "ModelEnabled", "false"], "");
    let refused: Value =
        serde_json::from_str(&client.chat("Still there?").await.expect("answers")).expect("an envelope");
    assert_eq!(refused["status"], "disabled", "{refused}");

    // One subscription at 2 updates a second while Tank1.Level is written 30 times at once:
    // the changes merge, and the frames' `skipped` counts are what the counter adds up.
    let mut subscription = client
        .subscribe(service_client::SubscribeRequest {
            names: vec!["Tank1.Level".to_owned()],
            max_rate: 2,
            ..Default::default()
        })
        .await
        .expect("subscribes");
    for level in 1..=30 {
        let written = client
            .write_tags(vec![service_client::TagWrite {
                name: "Tank1.Level".to_owned(),
                value: Some(service_client::WriteValue::Number(f64::from(level))),
            }])
            .await
            .expect("writes");
        assert_eq!(written[0].error, "", "{written:?}");
    }
    let (mut frames, mut skipped) = (0, 0);
    loop {
        let update = tokio::time::timeout(PATIENCE, subscription.next_update())
            .await
            .expect("an update in time")
            .expect("the subscription lives");
        frames += 1;
        skipped += update.skipped;
        if update
            .readings
            .iter()
            .any(|reading| reading.value == Some(service_client::TagValue::Number(30.0)))
        {
            break;
        }
    }
    assert!(skipped > 0, "30 writes at 2 updates a second merge");

    let (status, text) = scraped.scrape(true).await;
    assert_eq!(status, 200);
    let count = |series: &str| sample(&text, series).unwrap_or_else(|| panic!("no {series} in:\n{text}"));
    assert_eq!(count("tserver_chat_turns_total{status=\"ok\"}"), 1.0);
    assert_eq!(count("tserver_chat_turns_total{status=\"truncated\"}"), 1.0);
    assert_eq!(count("tserver_chat_turns_total{status=\"disabled\"}"), 1.0);
    assert_eq!(count("tserver_chat_tool_cap_reached_total"), 1.0);
    assert_eq!(
        count("tserver_budget_exhausted_total{gen_ai_operation_name=\"chat\"}"),
        1.0
    );
    assert_eq!(count("tserver_subscription_updates_total"), f64::from(frames));
    #[expect(clippy::cast_precision_loss, reason = "a few dozen")]
    let skipped = skipped as f64;
    assert_eq!(count("tserver_subscription_updates_coalesced_total"), skipped);
    assert_eq!(
        count("tserver_calls_total{call=\"write_tags\",outcome=\"ok\"}"),
        30.0
    );
    llm.stop().await;
}

#[tokio::test]
async fn a_server_with_metrics_off_records_nothing_and_says_so_at_metrics() {
    let solution = Solution::demo();
    let scraped = ScrapedServer::start(&solution, &["--metrics", "off"]);
    let client = Client::connect(scraped.served.addr, ClientOptions::default())
        .await
        .expect("connects");
    client.login("guest", "").await.expect("logs in");
    client.ping().await.expect("pongs");
    let (status, text) = scraped.scrape(true).await;
    assert_eq!(status, 404, "{text}");
    assert_eq!(
        text.trim(),
        "metrics are off on this server (tserver serve --metrics off)"
    );
    assert_eq!(
        get(scraped.http, "/healthz").await.0,
        200,
        "health is not a metric"
    );
}

#[test]
fn the_shipped_dashboard_reads_only_metrics_the_server_records() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/grafana-dashboard.json");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(file).expect("the dashboard is shipped"))
            .expect("JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(panels.len() >= 8, "{dashboard}");
    let mut used = std::collections::BTreeSet::new();
    for target in panels
        .iter()
        .flat_map(|panel| panel["targets"].as_array().into_iter().flatten())
    {
        let expr = target["expr"].as_str().expect("a query");
        let words = expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
        // Metric names; labels (`gen_ai_operation_name`...) are not.
        for word in words.filter(|word| word.starts_with("tserver_") || word.starts_with("gen_ai_client_")) {
            let name = ["_bucket", "_count", "_sum"]
                .iter()
                .find_map(|suffix| word.strip_suffix(suffix))
                .unwrap_or(word);
            assert!(
                tserver::telemetry::METRICS.contains(&name),
                "{name} is not recorded by the server: {expr}"
            );
            used.insert(name);
        }
    }
    let unshown: Vec<&str> = tserver::telemetry::METRICS
        .into_iter()
        .filter(|name| !used.contains(name))
        .collect();
    assert!(unshown.is_empty(), "not on the dashboard: {unshown:?}");
}

/// The keys an object in `text` repeats, at any depth (a JSON parser keeps only the last).
fn repeated_keys(text: &str) -> Vec<String> {
    use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};

    struct Keys<'a>(&'a mut Vec<String>);

    impl<'de> Visitor<'de> for Keys<'_> {
        type Value = ();

        fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            formatter.write_str("JSON")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut seen = std::collections::HashSet::new();
            while let Some(key) = map.next_key::<String>()? {
                if !seen.insert(key.clone()) {
                    self.0.push(key);
                }
                map.next_value_seed(Nested(self.0))?;
            }
            Ok(())
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(Nested(self.0))?.is_some() {}
            Ok(())
        }

        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    }

    struct Nested<'a>(&'a mut Vec<String>);

    impl<'de> serde::de::DeserializeSeed<'de> for Nested<'_> {
        type Value = ();

        fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
            deserializer.deserialize_any(Keys(self.0))
        }
    }

    let mut repeated = Vec::new();
    let mut deserializer = serde_json::Deserializer::from_str(text);
    deserializer
        .deserialize_any(Keys(&mut repeated))
        .unwrap_or_else(|error| panic!("{error}: {text}"));
    repeated
}

#[test]
fn json_log_lines_never_repeat_a_key_not_even_in_a_scripts_span() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8");
    let script = solution.path.with_file_name("hello.rhai");
    std::fs::write(&script, "log(\"hello from a script\");\n").expect("written");
    admin(
        &[
            "scripts",
            path,
            "add",
            "Hello",
            "--file",
            script.to_str().expect("utf-8"),
            "--trigger",
            "startup",
        ],
        "",
    );
    let served = ServerProcess::start(&solution.path, &["--log-format", "json"], &[]);
    let deadline = std::time::Instant::now() + PATIENCE;
    let line = loop {
        if let Some(line) = served
            .log()
            .lines
            .into_iter()
            .find(|line| line.contains("hello from a script"))
        {
            break line;
        }
        assert!(std::time::Instant::now() < deadline, "the script never logged");
        std::thread::sleep(Duration::from_millis(20));
    };
    let event: Value = serde_json::from_str(&line).expect("JSON");
    assert!(
        event["spans"].as_array().is_some_and(|spans| spans
            .iter()
            .any(|span| span["name"] == "script" && span["script"] == "Hello")),
        "{line}"
    );
    for line in served.log().lines {
        assert_eq!(repeated_keys(&line), Vec::<String>::new(), "{line}");
    }
}
