//! Live plant data from a real OPC UA server (the harness's async-opcua server): values of
//! every kind of node id read into tags through a subscription, its status codes mapped to
//! quality honestly, a killed server making tags Bad until it is back, Basic256Sha256 with a
//! password from a secret, and writes sent with the Write service and shown once reported.

use std::time::{Duration, Instant};

use plant_model::{Quality, TagValue};
use service_client::{WriteOutcome, WriteValue};
use tokio_util::sync::CancellationToken;
use tserver::{Runtime, ServerConfig};

use crate::modbus_sources::{until_disconnected, write};
use crate::mqtt_sources::until_connected;
use crate::support::{Solution, TestServer, admin};
use tserver_tests::opcua::{self as served, FlakyStatus, OpcUaServer, OpcUaServerOptions};

pub(crate) fn start_server() -> OpcUaServer {
    OpcUaServer::start(OpcUaServerOptions::new(env!(
        "CARGO_BIN_EXE_opcua-server-under-test"
    )))
}

/// The demo plant with an OPC UA source `plc` at `server` (changed by `edit`) and tags of
/// its own on each of the server's variables.
pub(crate) fn solution_on(server: &OpcUaServer, edit: impl FnOnce(&mut plant_model::SourceSpec)) -> Solution {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let mut model = plant_model::read(
        &admin(&["plant", &path, "export"], ""),
        plant_model::Format::Toml,
        "demo",
    )
    .expect("reads");
    let mut source = plant_model::SourceSpec {
        sampling_interval: 100,
        publishing_interval: 100,
        ..plant_model::SourceSpec::new("plc", server.url())
    };
    edit(&mut source);
    model.sources.push(source);
    let ns = server.namespace_index();
    let node = |name: &str| server.node(name);
    let tags = [
        ("Line1.Temp", "number", node(served::TEMP), false),
        // Writable here, read-only on the server: its writes are refused there.
        ("Line1.Count", "integer", node(served::COUNT), true),
        ("Line1.Running", "bool", node(served::RUNNING), false),
        ("Line1.Setpoint", "number", node(served::SETPOINT), true),
        ("Line1.Name", "string", node(served::NAME), false),
        ("Line1.Flaky", "number", node(served::FLAKY), false),
        (
            "Line1.Numeric",
            "number",
            format!("ns={ns};i={}", served::NUMERIC_ID),
            false,
        ),
        (
            "Line1.ByGuid",
            "number",
            format!("ns={ns};g={}", served::GUID_ID),
            false,
        ),
        ("Line1.Mistyped", "bool", node(served::TEMP), false),
    ];
    let mut text = model.to_toml().expect("toml");
    for (name, kind, node, writable) in tags {
        let path = format!("Plant/{}", name.replace('.', "/"));
        text.push_str(&format!(
            "\n[[tags]]\nname = \"{name}\"\npath = \"{path}\"\ntype = \"{kind}\"\nwritable = {writable}\n\
             source = {{ server = \"plc\", node = \"{node}\" }}\n"
        ));
    }
    let file = solution.path.with_file_name("plc.toml");
    std::fs::write(&file, text).expect("writes");
    admin(&["plant", &path, "import", file.to_str().expect("utf-8")], "");
    solution
}

/// Waits (bounded) until `tag` is as `wanted`; a failure shows the source's status too.
pub(crate) async fn until(
    runtime: &Runtime,
    tag: &str,
    wanted: impl Fn(&TagValue, Quality) -> bool,
    what: &str,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let sample = runtime.objects().tag(tag).expect("in the plant").current();
        if wanted(&sample.value, sample.quality) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{tag} never {what}: {sample:?}; {:?}",
            runtime.source_statuses()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn good(wanted: TagValue) -> impl Fn(&TagValue, Quality) -> bool {
    move |value, quality| *value == wanted && quality == Quality::GOOD
}

fn bad(value: &TagValue, quality: Quality) -> bool {
    let _ = value;
    quality == Quality::BAD
}

pub(crate) fn good_number(value: &TagValue, quality: Quality) -> bool {
    matches!(value, TagValue::Number(_)) && quality == Quality::GOOD
}

/// Waits until Temp reads a Good value other than `than`.
async fn until_temp_changes(runtime: &Runtime, than: &TagValue) {
    let than = than.clone();
    until(
        runtime,
        "Line1.Temp",
        move |value, quality| {
            quality == Quality::GOOD && *value != than && matches!(value, TagValue::Number(_))
        },
        "changed",
    )
    .await;
}

#[tokio::test]
async fn values_of_every_kind_of_node_id_flow_in_and_a_misfit_is_counted() {
    let server = start_server();
    let solution = solution_on(&server, |_| {});
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    until(&runtime, "Line1.Temp", good_number, "read").await;
    let first = runtime.objects().tag("Line1.Temp").expect("tag").current();
    until_temp_changes(&runtime, &first.value).await;
    until(
        &runtime,
        "Line1.Count",
        |value, quality| matches!(value, TagValue::Integer(_)) && quality == Quality::GOOD,
        "read",
    )
    .await;
    until(&runtime, "Line1.Running", good(TagValue::Bool(true)), "read").await;
    until(
        &runtime,
        "Line1.Name",
        good(TagValue::Text(served::NAME_VALUE.into())),
        "read",
    )
    .await;
    until(
        &runtime,
        "Line1.Numeric",
        good(TagValue::Number(served::NUMERIC_VALUE)),
        "read by its numeric id",
    )
    .await;
    until(
        &runtime,
        "Line1.ByGuid",
        good(TagValue::Number(served::GUID_VALUE)),
        "read by its GUID id",
    )
    .await;
    until(&runtime, "Line1.Mistyped", bad, "stays Bad: a Double is no bool").await;
    let status = runtime.source_statuses().remove(0);
    assert!(status.connected, "{status:?}");
    assert!(
        status.errors.get("wrong_type").copied().unwrap_or(0) > 0,
        "{status:?}"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn status_codes_map_to_quality_and_a_killed_server_makes_tags_bad_until_it_is_back() {
    let mut server = start_server();
    let solution = solution_on(&server, |_| {});
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    server.set_flaky(FlakyStatus::Good);
    until(&runtime, "Line1.Flaky", good_number, "Good").await;
    server.set_flaky(FlakyStatus::Uncertain);
    until(
        &runtime,
        "Line1.Flaky",
        |value, quality| matches!(value, TagValue::Number(_)) && quality == Quality::UNCERTAIN,
        "Uncertain, keeping a value",
    )
    .await;
    server.set_flaky(FlakyStatus::Bad);
    until(&runtime, "Line1.Flaky", bad, "Bad").await;

    until(&runtime, "Line1.Temp", good_number, "read").await;
    server.kill();
    until(&runtime, "Line1.Temp", bad, "Bad with the server gone").await;
    let kept = runtime.objects().tag("Line1.Temp").expect("tag").current();
    assert!(
        matches!(kept.value, TagValue::Number(_)),
        "keeps its value: {kept:?}"
    );
    until(&runtime, "Line1.Name", bad, "Bad with the server gone").await;
    let status = runtime.source_statuses().remove(0);
    assert!(
        status.errors.get("connection").copied().unwrap_or(0) > 0,
        "{status:?}"
    );

    server.restart();
    until_temp_changes(&runtime, &kept.value).await;
    until(
        &runtime,
        "Line1.Name",
        good(TagValue::Text(served::NAME_VALUE.into())),
        "Good after the restart",
    )
    .await;
    shutdown.cancel();
}

#[tokio::test]
async fn basic256sha256_with_a_password_from_a_secret_connects_and_a_wrong_one_does_not() {
    let server = start_server();
    let (user, password) = server.credentials();
    let (user, password) = (user.to_owned(), password.to_owned());
    let solution = solution_on(&server, |source| {
        source.security = "Basic256Sha256".to_owned();
        source.mode = "SignAndEncrypt".to_owned();
        source.username = user.clone();
        source.password = "/secret:PlcPassword".to_owned();
    });
    let path = solution.path.to_str().expect("utf-8");
    admin(&["secrets", path, "set", "PlcPassword"], &format!("{password}\n"));
    admin(&["sources", path, "trust", "plc"], "");
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    until_connected(&runtime).await;
    until(&runtime, "Line1.Temp", good_number, "read over SignAndEncrypt").await;
    shutdown.cancel();

    admin(&["secrets", path, "set", "PlcPassword"], "not-the-password\n");
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let status = runtime.source_statuses().remove(0);
        if status.errors.contains_key("connection") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the wrong password was not refused: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!status.connected, "{status:?}");
    let shown = format!("{status:?}");
    assert!(
        !shown.contains("not-the-password") && !shown.contains(&password),
        "{shown}"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn writes_reach_the_server_show_once_reported_and_are_refused_while_it_is_down() {
    let mut plc = start_server();
    let solution = solution_on(&plc, |_| {});
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let shutdown = CancellationToken::new();
    server.runtime.start_sources(&shutdown).await.expect("starts");
    until_connected(&server.runtime).await;
    until(&server.runtime, "Line1.Setpoint", good_number, "read").await;

    let written = write(&server, "Line1.Setpoint", WriteValue::Number(42.5)).await;
    assert_eq!(
        (written.error.as_str(), written.outcome()),
        ("", WriteOutcome::SentToField)
    );
    until(
        &server.runtime,
        "Line1.Setpoint",
        good(TagValue::Number(42.5)),
        "reported back",
    )
    .await;

    let refused = write(&server, "Line1.Count", WriteValue::Integer(5)).await;
    assert!(
        refused.error.contains("the server refused the write")
            && refused.error.contains("nothing was written"),
        "{}",
        refused.error
    );

    plc.kill();
    until_disconnected(&server.runtime).await;
    let refused = write(&server, "Line1.Setpoint", WriteValue::Number(7.0)).await;
    assert_eq!(
        refused.error,
        "source \"plc\" is not connected to its server; nothing was written"
    );
    shutdown.cancel();
}
