//! Live plant data from a real Modbus TCP device (the harness's tokio-modbus server): every
//! table and format read into tags, neighbours merged into few requests, exceptions, a hung
//! device and a lost one making tags Bad until they answer again, and writes sent to the
//! device, checked in engineering units and shown once read back.

use std::time::{Duration, Instant};

use plant_model::{Quality, TagValue};
use service_client::{TagWrite, WriteOutcome, WriteValue};
use tokio_modbus::{ExceptionCode, FunctionCode};
use tokio_util::sync::CancellationToken;
use tserver::{Runtime, ServerConfig};

use crate::mqtt_sources::{until, until_connected};
use crate::support::{ServerProcess, Solution, TestServer, admin};
use tserver_tests::modbus::{ModbusServer, Table};

/// The demo plant with a Modbus source `rack` at `device` and five tags of its own.
fn solution_on(device: &ModbusServer) -> Solution {
    solution_with(device, RACK_TAGS)
}

/// The demo plant with a Modbus source `rack` at `device` and the `[[tags]]` of `tags`.
fn solution_with(device: &ModbusServer, tags: &str) -> Solution {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let mut model = solution.plant_model();
    model.sources.push(plant_model::SourceSpec {
        poll_interval: 50,
        timeout: 300,
        ..plant_model::SourceSpec::new("rack", format!("modbus://{}", device.addr()))
    });
    let text = format!("{}\n{tags}", model.to_toml().expect("toml"));
    let file = solution.path.with_file_name("rack.toml");
    std::fs::write(&file, text).expect("writes");
    admin(&["plant", &path, "import", file.to_str().expect("utf-8")], "");
    solution
}

/// The rack's five tags.
const RACK_TAGS: &str = r#"
[[tags]]
name = "Line1.Temp"
path = "Plant/Line1/Temp"
type = "number"
writable = true
source = { device = "rack", holding_register = 100, format = "f32", word_order = "low_word_first" }

[[tags]]
name = "Line1.Speed"
path = "Plant/Line1/Speed"
type = "number"
writable = true
source = { device = "rack", holding_register = 102, format = "i16", scale = 0.1, offset = -40 }

[[tags]]
name = "Line1.Batch"
path = "Plant/Line1/Batch"
type = "integer"
source = { device = "rack", holding_register = 200, format = "u16" }

[[tags]]
name = "Line1.Count"
path = "Plant/Line1/Count"
type = "integer"
source = { device = "rack", input_register = 7, format = "u32" }

[[tags]]
name = "Line1.Running"
path = "Plant/Line1/Running"
type = "bool"
writable = true
source = { device = "rack", coil = 0 }

[[tags]]
name = "Line1.Door"
path = "Plant/Line1/Door"
type = "bool"
source = { device = "rack", discrete_input = 3 }
"#;

/// A device holding 123456.0 (f32, low word first), 21.5 (i16 in tenths, offset -40), batch
/// 7, count 70000, running and the door open.
async fn device() -> ModbusServer {
    let device = ModbusServer::start().await;
    device.set_holding(100, &[0x2000, 0x47F1, 615]);
    device.set_holding(200, &[7]);
    device.set_input(7, &[0x0001, 0x1170]);
    device.set_coil(0, &[true]);
    device.set_discrete(3, &[true]);
    device
}

fn good(wanted: TagValue) -> impl Fn(&TagValue, Quality) -> bool {
    move |value, quality| *value == wanted && quality == Quality::GOOD
}

fn bad(value: &TagValue, quality: Quality) -> bool {
    let _ = value;
    quality == Quality::BAD
}

/// Polls until the device answered `at_least` more requests of `function`.
async fn until_requests(device: &ModbusServer, function: FunctionCode, at_least: u64) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while device.requests(function) < at_least {
        assert!(
            Instant::now() < deadline,
            "fewer than {at_least} {function:?} requests"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn every_table_and_format_reads_into_its_tag_in_few_requests() {
    let device = device().await;
    let solution = solution_on(&device);
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    until(
        &runtime,
        "Line1.Temp",
        good(TagValue::Number(123_456.0)),
        "read its f32",
    )
    .await;
    until(
        &runtime,
        "Line1.Batch",
        good(TagValue::Integer(7)),
        "read its u16",
    )
    .await;
    until(
        &runtime,
        "Line1.Count",
        good(TagValue::Integer(70_000)),
        "read its u32",
    )
    .await;
    until(
        &runtime,
        "Line1.Running",
        good(TagValue::Bool(true)),
        "read its coil",
    )
    .await;
    until(
        &runtime,
        "Line1.Door",
        good(TagValue::Bool(true)),
        "read its input",
    )
    .await;
    until(
        &runtime,
        "Line1.Speed",
        |value, quality| {
            matches!(value, TagValue::Number(speed) if (speed - 21.5).abs() < 1e-9)
                && quality == Quality::GOOD
        },
        "read its scaled i16",
    )
    .await;
    // Each poll reads holding registers 100-102 (Temp and Speed together) and 200 apart: two
    // holding reads for every input read.
    device.reset_counts();
    until_requests(&device, FunctionCode::ReadInputRegisters, 10).await;
    let (holding, input) = (
        device.requests(FunctionCode::ReadHoldingRegisters),
        device.requests(FunctionCode::ReadInputRegisters),
    );
    assert!(
        holding.abs_diff(2 * input) <= 2,
        "{holding} holding reads for {input} input reads"
    );
    // A steady value keeps the time it last changed.
    let first = runtime.objects().tag("Line1.Batch").expect("tag").current();
    until_requests(&device, FunctionCode::ReadInputRegisters, input + 3).await;
    assert_eq!(
        runtime
            .objects()
            .tag("Line1.Batch")
            .expect("tag")
            .current()
            .timestamp,
        first.timestamp
    );
    device.set_holding(200, &[8]);
    until(
        &runtime,
        "Line1.Batch",
        good(TagValue::Integer(8)),
        "followed the device",
    )
    .await;
    // What the running server reports (stored every 2 s) says how the polls go.
    let path = solution.path.to_str().expect("utf-8");
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        let status = admin(&["sources", path, "status"], "");
        if status.contains(" polls, ") || Instant::now() > deadline {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        status.starts_with("rack: connected, 6 tags, ")
            && status.contains(" polls, ")
            && status.contains(" ms a cycle"),
        "{status}"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn exceptions_short_answers_a_hung_device_and_a_lost_one_make_tags_bad_until_they_answer() {
    let mut device = device().await;
    let solution = solution_on(&device);
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    until(&runtime, "Line1.Batch", good(TagValue::Integer(7)), "read").await;

    device.fail_at(Table::HoldingRegisters, 200, ExceptionCode::IllegalDataAddress);
    until(&runtime, "Line1.Batch", bad, "turned Bad on the exception").await;
    let batch = runtime.objects().tag("Line1.Batch").expect("tag").current();
    assert_eq!(batch.value, TagValue::Integer(7), "keeps its last value");
    let temp = runtime.objects().tag("Line1.Temp").expect("tag").current();
    assert_eq!(temp.quality, Quality::GOOD, "another request's tags stay Good");
    let status = &runtime.source_statuses()[0];
    assert!(status.connected, "an exception keeps the connection");
    assert!(
        status.errors.get("exception").copied().unwrap_or(0) > 0,
        "{status:?}"
    );
    device.heal(Table::HoldingRegisters, 200);
    until(&runtime, "Line1.Batch", good(TagValue::Integer(7)), "Good again").await;

    // Answers shorter than asked: the values they lack turn Bad and are counted, the rest
    // read on.
    device.set_short(true);
    until(&runtime, "Line1.Speed", bad, "turned Bad on a short answer").await;
    until(&runtime, "Line1.Batch", bad, "turned Bad on an empty answer").await;
    let temp = runtime.objects().tag("Line1.Temp").expect("tag").current();
    assert_eq!(temp.quality, Quality::GOOD, "the registers it got still read");
    let status = &runtime.source_statuses()[0];
    assert!(
        status.connected && status.errors.get("bad_value").copied().unwrap_or(0) > 0,
        "{status:?}"
    );
    device.set_short(false);
    until(&runtime, "Line1.Batch", good(TagValue::Integer(7)), "Good again").await;
    until(
        &runtime,
        "Line1.Speed",
        good(TagValue::Number(21.5)),
        "Good again",
    )
    .await;

    device.set_mute(true);
    until(
        &runtime,
        "Line1.Temp",
        bad,
        "turned Bad when the device stopped answering",
    )
    .await;
    device.set_mute(false);
    until(
        &runtime,
        "Line1.Temp",
        good(TagValue::Number(123_456.0)),
        "back after the hang",
    )
    .await;

    device.stop().await;
    for tag in ["Line1.Temp", "Line1.Count", "Line1.Running", "Line1.Door"] {
        until(&runtime, tag, bad, "turned Bad with the device gone").await;
    }
    // Said as what happened, never as the stale OS error tokio-modbus hands over at the end of
    // the stream ("No such file or directory").
    let (_, last_error) = runtime.source_statuses()[0]
        .last_error
        .clone()
        .expect("the loss is reported");
    assert!(
        !last_error.contains("os error") && !last_error.contains("No such file"),
        "{last_error}"
    );
    device.set_holding(100, &[0, 0x4120]);
    device.restart().await;
    until(
        &runtime,
        "Line1.Temp",
        good(TagValue::Number(10.0)),
        "read after the restart",
    )
    .await;
    until(
        &runtime,
        "Line1.Door",
        good(TagValue::Bool(true)),
        "Good after the restart",
    )
    .await;
    shutdown.cancel();
}

/// Waits (at most 30 s) until the first source reports its connection lost.
pub(crate) async fn until_disconnected(runtime: &Runtime) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while runtime.source_statuses()[0].connected {
        assert!(Instant::now() < deadline, "the loss was not noticed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) async fn write(
    server: &TestServer,
    name: &str,
    value: WriteValue,
) -> service_client::TagWriteResult {
    let client = server.guest().await;
    let mut written = client
        .write_tags(vec![TagWrite {
            name: name.to_owned(),
            value: Some(value),
        }])
        .await
        .expect("answered");
    written.remove(0)
}

#[tokio::test]
async fn writes_reach_the_device_checked_in_engineering_units_and_show_once_read_back() {
    let mut device = device().await;
    let solution = solution_on(&device);
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let shutdown = CancellationToken::new();
    server.runtime.start_sources(&shutdown).await.expect("starts");
    until_connected(&server.runtime).await;
    until(
        &server.runtime,
        "Line1.Temp",
        good(TagValue::Number(123_456.0)),
        "read",
    )
    .await;

    let written = write(&server, "Line1.Temp", WriteValue::Number(1.5)).await;
    assert_eq!(
        (written.error.as_str(), written.outcome()),
        ("", WriteOutcome::SentToField)
    );
    // 1.5 as f32 is 0x3FC0_0000, low word first.
    assert_eq!(device.holding(100, 2), [0x0000, 0x3FC0]);
    until(
        &server.runtime,
        "Line1.Temp",
        good(TagValue::Number(1.5)),
        "read back",
    )
    .await;

    let written = write(&server, "Line1.Speed", WriteValue::Number(-12.3)).await;
    assert_eq!(written.error, "");
    assert_eq!(device.holding(102, 1), [277], "(-12.3 + 40) / 0.1");
    let written = write(&server, "Line1.Running", WriteValue::Boolean(false)).await;
    assert_eq!(written.error, "");
    assert_eq!(device.coils(0, 1), [false]);
    until(
        &server.runtime,
        "Line1.Running",
        good(TagValue::Bool(false)),
        "read back",
    )
    .await;

    let refused = write(&server, "Line1.Speed", WriteValue::Number(5000.0)).await;
    assert!(
        refused.error.contains("outside what a i16 holds") && refused.error.contains("nothing was written"),
        "{}",
        refused.error
    );
    assert_eq!(device.holding(102, 1), [277], "a refused write sends nothing");

    device.fail_at(Table::HoldingRegisters, 100, ExceptionCode::IllegalDataValue);
    let refused = write(&server, "Line1.Temp", WriteValue::Number(2.0)).await;
    assert!(
        refused
            .error
            .contains("the device refused the write to holding_register 100")
            && refused.error.contains("nothing was written"),
        "{}",
        refused.error
    );
    device.heal(Table::HoldingRegisters, 100);

    device.stop().await;
    until_disconnected(&server.runtime).await;
    let refused = write(&server, "Line1.Temp", WriteValue::Number(3.0)).await;
    assert_eq!(
        refused.error,
        "source \"rack\" is not connected to its device; nothing was written"
    );
    shutdown.cancel();
}

/// A large raw value times a large scale passes what a number holds: the tag goes Bad with
/// the reason counted, never an infinite value in the plant; a value the scale keeps finite
/// reads again.
#[tokio::test]
async fn a_scale_that_overflows_makes_the_tag_bad_never_infinite() {
    let device = ModbusServer::start().await;
    // 1e300 as f64 is 0x7E37_E43C_8800_759C.
    device.set_holding(300, &[0x7E37, 0xE43C, 0x8800, 0x759C]);
    let solution = solution_with(
        &device,
        r#"
[[tags]]
name = "Line1.Huge"
path = "Plant/Line1/Huge"
type = "number"
source = { device = "rack", holding_register = 300, format = "f64", scale = 1e300 }
"#,
    );
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let status = &runtime.source_statuses()[0];
        if status.errors.get("bad_value").copied().unwrap_or(0) > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no bad value counted: {status:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let huge = runtime.objects().tag("Line1.Huge").expect("tag").current();
    assert_ne!(huge.quality, Quality::GOOD, "{huge:?}");
    assert!(
        huge.value.as_f64().is_none_or(f64::is_finite),
        "never an infinite value: {huge:?}"
    );
    // 2.0 as f64: 2e300, finite.
    device.set_holding(300, &[0x4000, 0, 0, 0]);
    until(
        &runtime,
        "Line1.Huge",
        good(TagValue::Number(2e300)),
        "reads again",
    )
    .await;
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_is_logged_once_in_words_and_the_return_once() {
    let mut device = device().await;
    let solution = solution_on(&device);
    let serving = ServerProcess::start(&solution.path, &[], &[]);
    serving.until_logged("connected to the Modbus device");
    device.stop().await;
    serving.until_logged("lost the Modbus device");
    // Tries to come back fail while it is away (50 ms polls, backing off): none is logged.
    tokio::time::sleep(Duration::from_secs(2)).await;
    device.restart().await;
    serving.until_logged_times("connected to the Modbus device", 2);
    let lines = serving.log().lines;
    let lost: Vec<&String> = lines
        .iter()
        .filter(|line| line.contains("lost the Modbus device"))
        .collect();
    assert_eq!(lost.len(), 1, "{}", lines.join("\n"));
    assert!(
        !lost[0].contains("os error") && !lost[0].contains("No such file"),
        "{}",
        lost[0]
    );
}
