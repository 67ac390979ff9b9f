//! Live plant data from a real OPC UA server (the harness's async-opcua server): values of
//! every kind of node id read into tags through a subscription, its status codes mapped to
//! quality honestly, a killed or stalled server making tags Bad until it is back, garbage
//! values counted, a flood of changes costing counts and never the latest values,
//! Basic256Sha256 with a password from a secret, and writes sent with the Write service and
//! shown once reported.

use std::time::{Duration, Instant};

use plant_model::{Quality, TagValue};
use service_client::{WriteOutcome, WriteValue};
use tokio_util::sync::CancellationToken;
use tserver::{Runtime, ServerConfig};

use crate::modbus_sources::{until_disconnected, write};
use crate::mqtt_sources::{until_connected, until_status};
use crate::support::{ServerProcess, Solution, TestServer, admin};
use tserver_tests::opcua::{self as served, FlakyStatus, Garbage, OpcUaServer, OpcUaServerOptions};

pub(crate) fn start_server() -> OpcUaServer {
    start_server_with_load(0)
}

/// A server with `load_variables` load variables besides the others.
fn start_server_with_load(load_variables: usize) -> OpcUaServer {
    OpcUaServer::start(OpcUaServerOptions {
        load_variables,
        ..OpcUaServerOptions::new(env!("CARGO_BIN_EXE_opcua-server-under-test"))
    })
}

/// A tag bound to a node: its name, type, node id, and whether it is writable.
type TagOnNode = (String, &'static str, String, bool);

/// The demo plant with an OPC UA source `plc` at `server` (changed by `edit`) and tags of
/// its own on each of the server's variables.
pub(crate) fn solution_on(server: &OpcUaServer, edit: impl FnOnce(&mut plant_model::SourceSpec)) -> Solution {
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
        ("Line1.ByOpaque", "number", server.opaque_node(), false),
        ("Line1.Mistyped", "bool", node(served::TEMP), false),
    ];
    let tags = tags
        .into_iter()
        .map(|(name, kind, node, writable)| (name.to_owned(), kind, node, writable))
        .collect();
    solution_with_tags(server, edit, tags)
}

/// The demo plant with an OPC UA source `plc` at `server` (changed by `edit`) and `tags`.
fn solution_with_tags(
    server: &OpcUaServer,
    edit: impl FnOnce(&mut plant_model::SourceSpec),
    tags: Vec<TagOnNode>,
) -> Solution {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let mut model = solution.plant_model();
    let mut source = plant_model::SourceSpec {
        sampling_interval: 100,
        publishing_interval: 100,
        ..plant_model::SourceSpec::new("plc", server.url())
    };
    edit(&mut source);
    model.sources.push(source);
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

/// The solution opened in process with its sources started; they stop with the token.
async fn sources_running(solution: &Solution) -> (Runtime, CancellationToken) {
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    (runtime, shutdown)
}

/// Waits (bounded) until `tag` is as `wanted`; a failure shows the source's status too.
pub(crate) async fn until(
    runtime: &Runtime,
    tag: &str,
    wanted: impl Fn(&TagValue, Quality) -> bool,
    what: &str,
) {
    until_within(Duration::from_secs(30), runtime, tag, wanted, what).await;
}

/// [`until`], waiting at most `within`.
async fn until_within(
    within: Duration,
    runtime: &Runtime,
    tag: &str,
    wanted: impl Fn(&TagValue, Quality) -> bool,
    what: &str,
) {
    let deadline = Instant::now() + within;
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
    let (runtime, shutdown) = sources_running(&solution).await;
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
    until(
        &runtime,
        "Line1.ByOpaque",
        good(TagValue::Number(served::OPAQUE_VALUE)),
        "read by its opaque id",
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
    let (runtime, shutdown) = sources_running(&solution).await;
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
    let thumbprint = crate::opcua_setup::server_thumbprint(&server);
    admin(
        &["sources", path, "trust", "plc", "--thumbprint", &thumbprint],
        "",
    );
    let (runtime, shutdown) = sources_running(&solution).await;
    until_connected(&runtime).await;
    until(&runtime, "Line1.Temp", good_number, "read over SignAndEncrypt").await;
    shutdown.cancel();

    admin(&["secrets", path, "set", "PlcPassword"], "not-the-password\n");
    let (runtime, shutdown) = sources_running(&solution).await;
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

/// Waits (bounded) until the source has counted at least `count` values of kind `kind`.
async fn until_refused(runtime: &Runtime, kind: &str, count: u64) {
    let counted = |status: &plant::SourceStatus| status.errors.get(kind).copied().unwrap_or(0) >= count;
    until_status(runtime, counted, &format!("counted {count} {kind}")).await;
}

#[tokio::test]
async fn nan_and_a_string_for_a_number_make_the_tag_bad_keeping_its_value_and_are_counted() {
    let mut server = start_server();
    // Alone on its source, so every misfit counted is its own.
    let tag = (
        "Line1.Garbage".to_owned(),
        "number",
        server.node(served::GARBAGE),
        false,
    );
    let solution = solution_with_tags(&server, |_| {}, vec![tag]);
    let (runtime, shutdown) = sources_running(&solution).await;
    let kept = TagValue::Number(served::GARBAGE_VALUE);
    until(&runtime, "Line1.Garbage", good(kept.clone()), "read").await;
    let before = runtime.source_statuses().remove(0);
    let misfits = before.errors.get("wrong_type").copied().unwrap_or(0);

    server.set_garbage(Garbage::NaN);
    until_refused(&runtime, "wrong_type", misfits + 1).await;
    let expected = kept.clone();
    until(
        &runtime,
        "Line1.Garbage",
        move |value, quality| *value == expected && quality == Quality::BAD,
        "Bad keeping its value after NaN",
    )
    .await;

    server.set_garbage(Garbage::Text);
    until_refused(&runtime, "wrong_type", misfits + 2).await;
    let sample = runtime.objects().tag("Line1.Garbage").expect("tag").current();
    assert_eq!(
        (sample.value.clone(), sample.quality),
        (kept.clone(), Quality::BAD),
        "a string for a number keeps the tag Bad with its value"
    );

    server.set_garbage(Garbage::None);
    until(&runtime, "Line1.Garbage", good(kept), "Good again").await;
    let status = runtime.source_statuses().remove(0);
    assert!(status.connected, "{status:?}");
    assert_eq!(
        status.errors.get("wrong_type"),
        Some(&(misfits + 2)),
        "each counted once: {status:?}"
    );
    assert!(
        status
            .last_error
            .as_ref()
            .is_some_and(|(_, message)| message.contains("Line1.Garbage")),
        "{status:?}"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn a_stalled_server_makes_tags_bad_and_they_come_back_when_it_goes_on() {
    let mut server = start_server();
    let solution = solution_on(&server, |_| {});
    let (runtime, shutdown) = sources_running(&solution).await;
    until(&runtime, "Line1.Temp", good_number, "read").await;
    until(
        &runtime,
        "Line1.Name",
        good(TagValue::Text(served::NAME_VALUE.into())),
        "read",
    )
    .await;

    // The connection stays open and nothing answers: only the keep-alive can tell.
    server.pause();
    let stalled = Duration::from_secs(60);
    until_within(
        stalled,
        &runtime,
        "Line1.Temp",
        bad,
        "Bad with the server stalled",
    )
    .await;
    until(&runtime, "Line1.Name", bad, "Bad with the server stalled").await;
    let kept = runtime.objects().tag("Line1.Temp").expect("tag").current();
    assert!(
        matches!(kept.value, TagValue::Number(_)),
        "keeps its value: {kept:?}"
    );
    let status = runtime.source_statuses().remove(0);
    assert!(
        status.errors.get("connection").copied().unwrap_or(0) > 0,
        "{status:?}"
    );

    server.resume();
    let back = Duration::from_secs(90);
    until_within(
        back,
        &runtime,
        "Line1.Name",
        good(TagValue::Text(served::NAME_VALUE.into())),
        "Good once the server goes on (a value that does not change)",
    )
    .await;
    until_temp_changes(&runtime, &kept.value).await;
    shutdown.cancel();
}

/// The demo plant with a tag on each of the server's `count` load variables.
fn solution_on_load(server: &OpcUaServer, count: usize) -> Solution {
    let tags = (0..count)
        .map(|index| {
            let name = served::load_variable(index);
            let node = server.node(&name);
            (name, "number", node, false)
        })
        .collect();
    solution_with_tags(server, |_| {}, tags)
}

#[tokio::test]
async fn a_flood_of_changes_costs_counts_and_the_latest_values_are_read() {
    const VARIABLES: usize = 2_000;
    const RATE: u32 = 20_000;
    const SECONDS: f64 = 3.0;
    let mut server = start_server_with_load(VARIABLES);
    let solution = solution_on_load(&server, VARIABLES);
    let (runtime, shutdown) = sources_running(&solution).await;
    let every_first_value = |status: &plant::SourceStatus| status.messages >= VARIABLES as u64;
    let before = until_status(&runtime, every_first_value, "read every first value").await;

    server.load(RATE, SECONDS);
    let last = served::load_variable(VARIABLES - 1);
    until_within(
        Duration::from_secs(60),
        &runtime,
        &last,
        good(TagValue::Number(served::load_final_value(VARIABLES - 1))),
        "read its final value",
    )
    .await;
    for index in 0..VARIABLES {
        let name = served::load_variable(index);
        until(
            &runtime,
            &name,
            good(TagValue::Number(served::load_final_value(index))),
            "read its final value",
        )
        .await;
    }
    let after = runtime.source_statuses().remove(0);
    assert!(after.connected, "{after:?}");
    assert!(
        after.errors.is_empty(),
        "nothing refused, no connection lost: {after:?}"
    );
    let applied = after.messages - before.messages;
    let coalesced = after.coalesced - before.coalesced;
    // Each value read or replaced was one change of the server's (it may coalesce too, with a
    // queue of one per item): the flood's, then one final value per variable.
    let changes = (f64::from(RATE) * SECONDS) as u64 + VARIABLES as u64;
    assert!(
        applied >= VARIABLES as u64 && applied + coalesced <= changes,
        "{applied} applied and {coalesced} coalesced of {changes} changes: {after:?}"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn a_tags_own_deadband_and_sampling_interval_reach_the_server() {
    let server = start_server();
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let mut model = solution.plant_model();
    model.sources.push(plant_model::SourceSpec {
        sampling_interval: 100,
        publishing_interval: 100,
        ..plant_model::SourceSpec::new("plc", server.url())
    });
    // Temp moves by at most 0.5 a tick between 15 and 25: only changes past 4 are reported.
    let text = format!(
        "{}\n[[tags]]\nname = \"Line1.Coarse\"\npath = \"Plant/Line1/Coarse\"\ntype = \"number\"\n\
         source = {{ server = \"plc\", node = \"{}\", deadband = 4.0, sampling_interval = 50 }}\n",
        model.to_toml().expect("toml"),
        server.node(served::TEMP)
    );
    let file = solution.path.with_file_name("plc.toml");
    std::fs::write(&file, text).expect("writes");
    admin(&["plant", &path, "import", file.to_str().expect("utf-8")], "");
    let (runtime, shutdown) = sources_running(&solution).await;

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen: Vec<f64> = Vec::new();
    while seen.len() < 4 {
        let sample = runtime.objects().tag("Line1.Coarse").expect("tag").current();
        if let (TagValue::Number(value), Quality::GOOD) = (&sample.value, sample.quality)
            && seen.last() != Some(value)
        {
            seen.push(*value);
        }
        assert!(Instant::now() < deadline, "only {seen:?} reported");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for pair in seen.windows(2) {
        assert!(
            (pair[1] - pair[0]).abs() > 4.0,
            "a change within the deadband was reported: {seen:?}"
        );
    }
    shutdown.cancel();
}

/// A plant-sized server: 10,000 bound nodes all changing together (a load's final values are
/// set in one go) arrive whole, the session stays up, and the status says so truthfully.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_nodes_changing_together_all_arrive_and_the_session_stays_up() {
    const VARIABLES: usize = 10_000;
    let mut server = start_server_with_load(VARIABLES);
    let solution = solution_on_load(&server, VARIABLES);
    let (runtime, shutdown) = sources_running(&solution).await;
    let every_first_value = |status: &plant::SourceStatus| status.messages >= VARIABLES as u64;
    until_status(&runtime, every_first_value, "read every first value").await;
    for round in 0..2 {
        // A short burst, then every variable's final value at once.
        server.load(20_000, 0.5);
        for index in (0..VARIABLES).rev() {
            let name = served::load_variable(index);
            until_within(
                Duration::from_secs(60),
                &runtime,
                &name,
                good(TagValue::Number(served::load_final_value(index))),
                "read its final value",
            )
            .await;
        }
        let status = runtime.source_statuses().remove(0);
        assert!(status.connected, "round {round}: {status:?}");
        assert!(
            status.errors.is_empty(),
            "round {round}: nothing refused, no connection lost: {status:?}"
        );
    }
    shutdown.cancel();
}

/// The demo plant with an OPC UA source `plc` at the asyncua server `plc` and a tag on each of
/// its first `count` variables (`Plc.V00042` on `V00042`).
fn solution_on_asyncua(plc: &tserver_tests::asyncua::AsyncuaPlc, count: usize) -> Solution {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let mut model = solution.plant_model();
    model.sources.push(plant_model::SourceSpec {
        sampling_interval: 100,
        publishing_interval: 200,
        ..plant_model::SourceSpec::new("plc", plc.url())
    });
    let mut text = model.to_toml().expect("toml");
    for index in 0..count {
        text.push_str(&format!(
            "\n[[tags]]\nname = \"Plc.V{index:05}\"\npath = \"Plant/Plc/V{index:05}\"\ntype = \"number\"\n\
             source = {{ server = \"plc\", node = \"{}\" }}\n",
            plc.node(index)
        ));
    }
    let file = solution.path.with_file_name("asyncua.toml");
    std::fs::write(&file, text).expect("writes");
    admin(&["plant", &path, "import", file.to_str().expect("utf-8")], "");
    solution
}

/// Against another implementation's server, the size of a plant's PLC: 10,000 bound nodes
/// changing together arrive whole (however large the server makes its publish responses), and
/// the status tells the truth about the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plc_sized_server_of_another_implementation_delivers_every_change() {
    const VARIABLES: usize = 10_000;
    let mut plc = tserver_tests::asyncua::AsyncuaPlc::start(VARIABLES);
    let solution = solution_on_asyncua(&plc, VARIABLES);
    let (runtime, shutdown) = sources_running(&solution).await;
    let every_first_value = |status: &plant::SourceStatus| status.messages >= VARIABLES as u64;
    until_status(&runtime, every_first_value, "read every first value").await;
    for base in [1_000_u32, 50_000] {
        plc.set_all(base);
        for index in (0..VARIABLES).rev() {
            until_within(
                Duration::from_secs(60),
                &runtime,
                &format!("Plc.V{index:05}"),
                good(TagValue::Number(f64::from(base) + index as f64)),
                "read the value set",
            )
            .await;
        }
        let status = runtime.source_statuses().remove(0);
        assert!(status.connected, "after {base}: {status:?}");
        assert!(status.errors.is_empty(), "after {base}: {status:?}");
    }
    shutdown.cancel();
}

/// Browsing a folder of 12,000 variables on another implementation's server: the plant file
/// skeleton stops at its bound, saying so, instead of failing on the message's size; a plain
/// browse lists the folder whole.
#[test]
fn a_folder_of_twelve_thousand_variables_browses_and_makes_a_skeleton() {
    const VARIABLES: usize = 12_000;
    let plc = tserver_tests::asyncua::AsyncuaPlc::start(VARIABLES);
    let solution = solution_on_asyncua(&plc, 0);
    let path = solution.path.to_str().expect("utf-8");
    let folder = plc.folder();
    let skeleton = admin(&["sources", path, "browse", "plc", &folder, "--plant"], "");
    assert!(
        skeleton.starts_with(&format!(
            "# Tags for the {} variables under {folder} of {}",
            plant::SKELETON_MAX_VARIABLES,
            plc.url()
        )),
        "{}",
        &skeleton[..skeleton.len().min(400)]
    );
    assert!(
        skeleton.contains(&format!(
            "# Stopped at {} variables",
            plant::SKELETON_MAX_VARIABLES
        )),
        "{}",
        &skeleton[..skeleton.len().min(400)]
    );
    assert_eq!(
        skeleton.matches("[[tags]]").count(),
        plant::SKELETON_MAX_VARIABLES
    );
    let listed = admin(&["sources", path, "browse", "plc", &folder], "");
    let rows = listed.lines().filter(|line| line.contains(";s=V")).count();
    assert_eq!(rows, VARIABLES, "{}", &listed[..listed.len().min(400)]);
}

#[test]
fn a_lost_server_and_its_return_are_logged_once_each_and_nothing_else_warns() {
    let mut opcua = start_server();
    let solution = solution_on(&opcua, |_| {});
    let serving = ServerProcess::start(&solution.path, &[], &[]);
    serving.until_logged("connected to the OPC UA server");
    opcua.kill();
    serving.until_logged("lost the OPC UA server");
    // Some tries to come back fail while it is away: none of them is logged again.
    std::thread::sleep(Duration::from_secs(3));
    opcua.restart();
    serving.until_logged("the OPC UA server is back");
    let lines = serving.log().lines;
    let count = |text: &str| lines.iter().filter(|line| line.contains(text)).count();
    assert_eq!(count("lost the OPC UA server"), 1, "{}", lines.join("\n"));
    assert_eq!(count("the OPC UA server is back"), 1, "{}", lines.join("\n"));
    let warnings: Vec<&String> = lines
        .iter()
        .filter(|line| line.contains(" WARN ") && !line.contains("lost the OPC UA server"))
        .collect();
    assert!(warnings.is_empty(), "{warnings:#?}");
}

#[test]
fn the_demo_on_a_plant_with_an_opcua_source_prints_no_stray_warning() {
    let opcua = start_server();
    let solution = solution_on(&opcua, |_| {});
    let finished = std::process::Command::new(env!("CARGO_BIN_EXE_tserver-demo-under-test"))
        .args(["--builtin-model", "--no-panel", "--solution"])
        .arg(&solution.path)
        .args(["-q", "What is the value of Line1.Temp?"])
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the demo runs");
    let (output, errors) = (
        String::from_utf8_lossy(&finished.stdout),
        String::from_utf8_lossy(&finished.stderr),
    );
    assert!(finished.status.success(), "{output}\n{errors}");
    assert!(output.contains("Line1.Temp = "), "{output}");
    assert!(errors.trim().is_empty(), "nothing but the chat: {errors}");
}
