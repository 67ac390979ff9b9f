//! The runtime tools against a real demo solution: every tool's happy path, caps and the
//! truncated flag, bad arguments, unknown names, custom tools, and size bounds.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use localai::ModelOptions;
use localai::tools::{RegistrationError, ToolError};
use plant::tools::MAX_RESULT_BYTES;
use plant_model::{Quality, TagValue};
use serde_json::{Value, json};
use tserver::Runtime;

use crate::plant::rfc3339;
use crate::support::{Solution, admin};

/// Every tool bit and the master bit.
const ALL_TOOLS: u32 = 0x02 | 0x04 | 0x08 | 0x10 | 0x20;

pub(crate) async fn call(runtime: &Runtime, name: &str, arguments: Value) -> Result<Value, ToolError> {
    let tool = runtime
        .tools()
        .offered(ModelOptions::new(ALL_TOOLS))
        .iter()
        .find(|tool| tool.name() == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} is offered"));
    let caller = localai::tools::ToolCaller::Script {
        script: "RuntimeToolsTest".into(),
    };
    tool.invoke(arguments, caller).await.map(|output| output.result)
}

async fn ok(runtime: &Runtime, name: &str, arguments: Value) -> Value {
    match call(runtime, name, arguments.clone()).await {
        Ok(result) => result,
        Err(error) => panic!("{name}({arguments}) failed: {error:?}"),
    }
}

async fn failure(runtime: &Runtime, name: &str, arguments: Value) -> ToolError {
    call(runtime, name, arguments.clone())
        .await
        .expect_err(&format!("{name}({arguments}) fails"))
}

fn demo() -> (Solution, Runtime) {
    let solution = Solution::demo();
    let runtime = Runtime::open(&solution.path).expect("demo opens");
    (solution, runtime)
}

/// The first whole millisecond after `time`.
fn next_millisecond(time: SystemTime) -> SystemTime {
    let since = time.duration_since(UNIX_EPOCH).expect("after 1970");
    UNIX_EPOCH + Duration::from_millis(u64::try_from(since.as_millis()).expect("in range") + 1)
}

fn names(list: &Value, key: &str) -> Vec<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|item| item[key].as_str().expect("a name").to_owned())
        .collect()
}

#[test]
fn each_category_bit_offers_its_tools() {
    let (_solution, runtime) = demo();
    let offered = |bits: u32| -> Vec<String> {
        runtime
            .tools()
            .offered(ModelOptions::new(bits))
            .iter()
            .map(|tool| tool.name().to_owned())
            .collect()
    };
    assert_eq!(offered(0x02 | 0x04), UNS_TOOLS);
    assert_eq!(
        offered(0x02 | 0x08),
        [
            "runtime_get_active_alarms",
            "runtime_query_alarm_history",
            "runtime_get_alarm_report"
        ]
    );
    assert_eq!(
        offered(0x02 | 0x10),
        [
            "runtime_get_tag_history",
            "runtime_find_excursions",
            "runtime_get_values_at"
        ]
    );
    assert!(offered(0x04 | 0x08 | 0x10).is_empty(), "no master bit, no tools");
    assert_eq!(offered(ALL_TOOLS).len(), 12);
}

#[test]
fn the_runtime_catalog_offered_is_master_and_category_for_any_bits() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    // One runtime for every case: opening one per case would spend the test in SQLite.
    let (_solution, runtime) = demo();
    let mut runner = TestRunner::new(Config::with_cases(1024));
    let outcome = runner.run(&any::<u32>(), |bits| {
        let offered: Vec<String> = runtime
            .tools()
            .offered(ModelOptions::new(bits))
            .iter()
            .map(|tool| tool.name().to_owned())
            .collect();
        let mut expected = Vec::new();
        if bits & 0x02 != 0 {
            for (bit, names) in [
                (0x04, &UNS_TOOLS[..]),
                (
                    0x08,
                    &[
                        "runtime_get_active_alarms",
                        "runtime_query_alarm_history",
                        "runtime_get_alarm_report",
                    ][..],
                ),
                (
                    0x10,
                    &[
                        "runtime_get_tag_history",
                        "runtime_find_excursions",
                        "runtime_get_values_at",
                    ][..],
                ),
                (
                    0x40,
                    &[
                        "runtime_propose_write",
                        "runtime_propose_alarm_ack",
                        "runtime_propose_alarm_shelve",
                        "runtime_get_proposal",
                    ][..],
                ),
            ] {
                if bits & bit != 0 {
                    expected.extend(names.iter().map(|name| (*name).to_owned()));
                }
            }
        }
        prop_assert_eq!(offered, expected);
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

const UNS_TOOLS: [&str; 6] = [
    "runtime_get_value",
    "runtime_browse_object_model",
    "runtime_search_uns",
    "runtime_describe_object",
    "runtime_list_instances",
    "runtime_search_documents",
];

#[tokio::test]
async fn get_value_reads_the_spec_example_by_name_path_or_case() {
    let (_solution, runtime) = demo();
    let result = ok(
        &runtime,
        "runtime_get_value",
        json!({"tag": "Pump1.MotorCurrent"}),
    )
    .await;
    assert_eq!(result["value"], 12.4);
    assert_eq!(result["quality"], "Good");
    assert_eq!(result["units"], "A");
    assert_eq!(result["path"], "Plant/Area1/Pump1/MotorCurrent");
    for alias in [
        "Plant/Area1/Pump1/MotorCurrent",
        "/plant/area1/pump1/motorcurrent/",
        "pump1.motorcurrent",
    ] {
        let by_alias = ok(&runtime, "runtime_get_value", json!({"tag": alias})).await;
        assert_eq!(by_alias["tag"], "Pump1.MotorCurrent", "{alias}");
    }
    let text = ok(&runtime, "runtime_get_value", json!({"tag": "Pump1.Mode"})).await;
    assert_eq!(text["value"], "Auto");
    assert!(text.get("units").is_none(), "no empty units");
}

#[tokio::test]
async fn bad_arguments_and_unknown_tags_are_structured_tool_errors() {
    let (_solution, runtime) = demo();
    for arguments in [
        json!({}),
        json!({"tag": 7}),
        json!({"tag": ""}),
        json!({"tag": "Pump1.MotorCurrent", "extra": true}),
        json!("Pump1.MotorCurrent"),
    ] {
        let error = failure(&runtime, "runtime_get_value", arguments.clone()).await;
        assert_eq!(error.kind, "invalid_arguments", "{arguments}");
        assert_eq!(error.to_content()["ok"], false);
    }
    let error = failure(
        &runtime,
        "runtime_get_value",
        json!({"tag": "Pump9.MotorCurrent"}),
    )
    .await;
    assert_eq!(error.kind, "not_found");
    assert!(!error.retryable);
    let suggestions: Vec<&str> = error.details["suggestions"]
        .as_array()
        .expect("suggestions")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(suggestions.contains(&"Pump1.MotorCurrent"), "{suggestions:?}");
    let error = failure(
        &runtime,
        "runtime_describe_object",
        json!({"path": "Nowhere/At/All"}),
    )
    .await;
    assert_eq!(error.kind, "not_found");
    let error = failure(&runtime, "runtime_get_tag_history", json!({"tag": "NoSuch.Tag"})).await;
    assert_eq!(error.kind, "not_found");
    let error = failure(
        &runtime,
        "runtime_get_tag_history",
        json!({"tag": "Tank1.Level", "start": "last tuesday"}),
    )
    .await;
    assert_eq!(error.kind, "invalid_arguments");
    let error = failure(
        &runtime,
        "runtime_get_active_alarms",
        json!({"min_priority": 5000}),
    )
    .await;
    assert_eq!(error.kind, "invalid_arguments");
}

#[tokio::test]
async fn browse_walks_the_uns_with_a_cap() {
    let (_solution, runtime) = demo();
    let root = ok(&runtime, "runtime_browse_object_model", json!({})).await;
    assert_eq!(root["path"], "");
    assert_eq!(names(&root["children"], "name"), ["Plant"]);
    let area = ok(
        &runtime,
        "runtime_browse_object_model",
        json!({"path": "Plant/Area1"}),
    )
    .await;
    assert_eq!(names(&area["children"], "name"), ["Pump1", "Pump2", "Tank1"]);
    assert_eq!(area["truncated"], false);
    let pump = ok(
        &runtime,
        "runtime_browse_object_model",
        json!({"path": "/Plant/Area1/Pump1/"}),
    )
    .await;
    let children = pump["children"].as_array().expect("children");
    assert_eq!(children[0]["kind"], "folder");
    assert_eq!(children[0]["name"], "Motor1");
    let current = children
        .iter()
        .find(|child| child["name"] == "MotorCurrent")
        .expect("MotorCurrent listed");
    assert_eq!(
        (current["kind"].as_str(), current["value"].as_f64()),
        (Some("tag"), Some(12.4))
    );
    let capped = ok(
        &runtime,
        "runtime_browse_object_model",
        json!({"path": "Plant/Area1/Pump1", "max_results": 2}),
    )
    .await;
    assert_eq!(capped["children"].as_array().map(Vec::len), Some(2));
    assert_eq!(capped["truncated"], true);
    assert_eq!(capped["totalChildren"], pump["totalChildren"]);
    let error = failure(
        &runtime,
        "runtime_browse_object_model",
        json!({"path": "Plant/Area9"}),
    )
    .await;
    assert_eq!(error.kind, "not_found");
    let error = failure(
        &runtime,
        "runtime_browse_object_model",
        json!({"path": "Tank1.Level"}),
    )
    .await;
    assert_eq!(error.kind, "invalid_arguments");
    assert!(error.message.contains("runtime_get_value"), "{}", error.message);
}

#[tokio::test]
async fn search_ranks_name_matches_and_caps() {
    let (_solution, runtime) = demo();
    let found = ok(&runtime, "runtime_search_uns", json!({"query": "pump current"})).await;
    assert_eq!(
        names(&found["results"], "tag"),
        ["Pump1.MotorCurrent", "Pump2.MotorCurrent"]
    );
    assert_eq!(found["truncated"], false);
    let by_description = ok(&runtime, "runtime_search_uns", json!({"query": "winding"})).await;
    assert_eq!(names(&by_description["results"], "tag"), ["Motor1.Temperature"]);
    let capped = ok(
        &runtime,
        "runtime_search_uns",
        json!({"query": "level", "max_results": 1}),
    )
    .await;
    assert_eq!(capped["results"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        (capped["totalMatches"].as_u64(), capped["truncated"].as_bool()),
        (Some(2), Some(true))
    );
    let none = ok(&runtime, "runtime_search_uns", json!({"query": "compressor"})).await;
    assert_eq!(
        (
            none["results"].as_array().map(Vec::len),
            none["truncated"].as_bool()
        ),
        (Some(0), Some(false))
    );
    let error = failure(&runtime, "runtime_search_uns", json!({"query": "./,"})).await;
    assert_eq!(error.kind, "invalid_arguments");
}

#[tokio::test]
async fn describe_shows_a_tag_with_its_alarms_and_a_folder_with_its_contents() {
    let (_solution, runtime) = demo();
    let tag = ok(
        &runtime,
        "runtime_describe_object",
        json!({"path": "Motor1.Temperature"}),
    )
    .await;
    assert_eq!(tag["kind"], "tag");
    assert_eq!(tag["type"], "number");
    assert_eq!(tag["range"], json!({"low": 0.0, "high": 150.0}));
    assert_eq!(
        names(&tag["alarms"], "name"),
        ["Motor1.Temperature.Hi", "Motor1.Temperature.HiHi"]
    );
    assert_eq!(tag["alarms"][0]["state"], "normal");
    // What to do about each alarm comes with it.
    assert_eq!(
        tag["alarms"][1]["response"],
        "Stop Pump 1 now, start Pump 2, and call maintenance to inspect the motor"
    );
    assert_eq!(tag["alarms"][1]["time_to_respond_s"], 60);
    let folder = ok(
        &runtime,
        "runtime_describe_object",
        json!({"path": "Plant/Area1/Pump1"}),
    )
    .await;
    assert_eq!(folder["kind"], "folder");
    assert_eq!(folder["folders"], json!(["Motor1"]));
    assert_eq!(folder["tagsBelow"], 7);
    assert!(
        folder["tags"]
            .as_array()
            .is_some_and(|tags| tags.contains(&json!("Pump1.Mode")))
    );
}

#[tokio::test]
async fn list_instances_matches_masks_and_clamps_caps_to_the_ceiling() {
    let (_solution, runtime) = demo();
    let all = ok(&runtime, "runtime_list_instances", json!({})).await;
    assert_eq!(
        names(&all["instances"], "name"),
        ["Pump1", "Motor1", "Pump2", "Tank1", "Tank2"]
    );
    let pumps = ok(&runtime, "runtime_list_instances", json!({"name_mask": "pump*"})).await;
    assert_eq!(names(&pumps["instances"], "name"), ["Pump1", "Pump2"]);
    // The demo plant declares no equipment types: no type is made up from a name.
    assert_eq!(pumps["instances"][0].get("type"), None);
    assert!(
        pumps["instances"][0]["tags"]
            .as_array()
            .is_some_and(|tags| tags.contains(&json!("Pump1.FlowRate")))
    );
    let one = ok(
        &runtime,
        "runtime_list_instances",
        json!({"name_mask": "*", "max_results": 1}),
    )
    .await;
    assert_eq!(
        (one["total"].as_u64(), one["truncated"].as_bool()),
        (Some(5), Some(true))
    );
    let huge = ok(
        &runtime,
        "runtime_list_instances",
        json!({"max_results": 1_000_000}),
    )
    .await;
    assert_eq!(
        (huge["total"].as_u64(), huge["truncated"].as_bool()),
        (Some(5), Some(false))
    );
    let none = ok(
        &runtime,
        "runtime_list_instances",
        json!({"name_mask": "Compressor?"}),
    )
    .await;
    assert_eq!(none["instances"], json!([]));
}

#[tokio::test]
async fn active_alarms_follow_writes_and_acknowledgements_and_land_in_the_history() {
    let (_solution, runtime) = demo();
    let plant = runtime.plant();
    // `init --demo` seeded alarm history up to now, and opening may have cleared an alarm the
    // seed left tripped; count only what this test causes. The history keeps milliseconds, so
    // the window starts at the next millisecond, once the clock has reached it.
    let began = next_millisecond(SystemTime::now());
    while SystemTime::now() < began {
        std::thread::sleep(Duration::from_millis(1));
    }
    let began = humantime::format_rfc3339_millis(began).to_string();
    let quiet = ok(&runtime, "runtime_get_active_alarms", json!({})).await;
    assert_eq!(quiet["alarms"], json!([]), "the demo starts inside its limits");

    let events = plant
        .write("Motor1.Temperature", TagValue::Number(97.0), Quality::GOOD)
        .expect("write");
    assert_eq!(events.len(), 2, "Hi and HiHi trip: {events:?}");
    plant
        .write("Tank2.Level", TagValue::Number(20.0), Quality::GOOD)
        .expect("write");
    let active = ok(&runtime, "runtime_get_active_alarms", json!({})).await;
    assert_eq!(
        names(&active["alarms"], "name"),
        [
            "Motor1.Temperature.HiHi",
            "Motor1.Temperature.Hi",
            "Tank2.Level.Lo"
        ],
        "most urgent first"
    );
    assert_eq!(active["alarms"][0]["state"], "active");
    assert_eq!(active["alarms"][0]["currentValue"], 97.0);
    let hihi = &active["alarms"][0];
    assert_eq!(
        (
            &hihi["cause"],
            &hihi["consequence"],
            &hihi["response"],
            &hihi["time_to_respond_s"]
        ),
        (
            &json!("Cooling fan failed, blocked air intake, or a sustained overload"),
            &json!("Winding insulation damage; the motor protection trips Pump 1"),
            &json!("Stop Pump 1 now, start Pump 2, and call maintenance to inspect the motor"),
            &json!(60)
        )
    );
    let area2 = ok(
        &runtime,
        "runtime_get_active_alarms",
        json!({"path": "Plant/Area2"}),
    )
    .await;
    assert_eq!(names(&area2["alarms"], "name"), ["Tank2.Level.Lo"]);
    let urgent = ok(
        &runtime,
        "runtime_get_active_alarms",
        json!({"min_priority": 800}),
    )
    .await;
    assert_eq!(names(&urgent["alarms"], "name"), ["Motor1.Temperature.HiHi"]);
    let capped = ok(&runtime, "runtime_get_active_alarms", json!({"max_results": 1})).await;
    assert_eq!(
        (capped["total"].as_u64(), capped["truncated"].as_bool()),
        (Some(3), Some(true))
    );

    let acknowledge = |alarm| crate::support::acknowledge(&runtime, alarm, "operator");
    assert_eq!(acknowledge("Motor1.Temperature.HiHi").await, Ok(true));
    assert_eq!(acknowledge("Motor1.Temperature.HiHi").await, Ok(false));
    assert!(acknowledge("No.Such.Alarm").await.is_err());
    plant
        .write("Motor1.Temperature", TagValue::Number(60.0), Quality::GOOD)
        .expect("write");
    let after = ok(
        &runtime,
        "runtime_get_active_alarms",
        json!({"path": "Motor1.Temperature"}),
    )
    .await;
    assert_eq!(
        names(&after["alarms"], "name"),
        ["Motor1.Temperature.Hi"],
        "the acknowledged HiHi is gone once normal; the unacknowledged Hi waits"
    );
    assert_eq!(after["alarms"][0]["state"], "normal-unacked");

    let history = ok(
        &runtime,
        "runtime_query_alarm_history",
        json!({"tag": "Motor1.Temperature", "start": began}),
    )
    .await;
    let events: Vec<(String, String)> = history["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|event| {
            (
                event["alarm"].as_str().unwrap_or_default().to_owned(),
                event["event"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(events.len(), 5, "{events:?}");
    assert_eq!(events.iter().filter(|(_, kind)| kind == "Active").count(), 2);
    assert_eq!(events.iter().filter(|(_, kind)| kind == "Cleared").count(), 2);
    assert!(events.contains(&("Motor1.Temperature.HiHi".into(), "Acknowledged".into())));
    assert_eq!(history["truncated"], false);
    let capped = ok(
        &runtime,
        "runtime_query_alarm_history",
        json!({"start": began, "max_results": 2}),
    )
    .await;
    assert_eq!(capped["events"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        (capped["total"].as_u64(), capped["truncated"].as_bool()),
        (Some(6), Some(true))
    );
}

#[tokio::test]
async fn alarm_guidance_is_cut_like_a_message_and_left_out_where_the_plant_says_none() {
    let solution = Solution::demo();
    let long = "Open the drain. ".repeat(125);
    let plant = crate::plant_file::guided_boiler().replacen("Trip the burner", &long, 1);
    let file = solution.path.with_file_name("boiler.toml");
    std::fs::write(&file, plant).expect("writes");
    let path = solution.path.to_str().expect("utf-8 path");
    admin(&["plant", path, "import", file.to_str().expect("utf-8 path")], "");
    let runtime = Runtime::open(&solution.path).expect("opens");
    let active = ok(&runtime, "runtime_get_active_alarms", json!({})).await;
    let response = active["alarms"][0]["response"].as_str().expect("a response");
    assert_eq!(
        response.chars().count(),
        501,
        "500 characters and the mark of the cut"
    );
    assert!(response.ends_with('…') && long.starts_with(response.trim_end_matches('…')));
    let described = ok(
        &runtime,
        "runtime_describe_object",
        json!({"path": "Boiler.Pressure"}),
    )
    .await;
    let alarm = described["alarms"][0].as_object().expect("an alarm");
    for key in ["cause", "consequence", "response", "time_to_respond_s"] {
        assert!(!alarm.contains_key(key), "{key} in {alarm:?}");
    }
}

/// Writes Tank 1's level as of `time`, as the field would have reported it then.
fn tank1_level_at(runtime: &Runtime, time: SystemTime, value: f64) {
    runtime
        .plant()
        .write_at("Tank1.Level", TagValue::Number(value), Quality::GOOD, time)
        .expect("written");
}

#[tokio::test]
async fn tag_history_thins_long_windows_and_reports_statistics() {
    let (_solution, runtime) = demo();
    // Five hours ago, before the seeded history: 150 seconds of a level wavering 10 around 50
    // (past its deviation, so each is stored), one spike to 97 in the middle (150 samples fit
    // one result's bytes).
    let origin = UNIX_EPOCH
        + Duration::from_secs(
            (SystemTime::now() - Duration::from_secs(5 * 3600))
                .duration_since(UNIX_EPOCH)
                .expect("after 1970")
                .as_secs(),
        );
    for second in 0..150_u32 {
        let value = match second {
            75 => 97.0,
            second => 50.0 + f64::from(second % 2) * 10.0,
        };
        tank1_level_at(&runtime, origin + Duration::from_secs(u64::from(second)), value);
    }
    let window = |max_samples: u64| {
        json!({"tag": "Tank1.Level", "start": rfc3339(origin),
               "end": rfc3339(origin + Duration::from_secs(149)), "max_samples": max_samples})
    };
    let all = ok(&runtime, "runtime_get_tag_history", window(1000)).await;
    assert_eq!(all["totalSamples"], 150);
    // A window from 11 s opens with the level stored at 10 s (60 at 9 s, 50 at 10 s).
    let from_eleven = ok(
        &runtime,
        "runtime_get_tag_history",
        json!({"tag": "Tank1.Level", "start": rfc3339(origin + Duration::from_secs(11)),
               "end": rfc3339(origin + Duration::from_secs(149))}),
    )
    .await;
    assert_eq!(from_eleven["valueBefore"]["value"], 50.0);
    assert_eq!(from_eleven["totalSamples"], 139);
    assert_eq!(all["truncated"], false);
    assert_eq!(all["units"], "%");
    assert_eq!(
        (all["stats"]["min"].as_f64(), all["stats"]["max"].as_f64()),
        (Some(50.0), Some(97.0))
    );
    // Cut to its default cap of 100, the trend still holds the spike and the swing (M4).
    let hundred = ok(
        &runtime,
        "runtime_get_tag_history",
        json!({"tag": "Tank1.Level", "start": rfc3339(origin), "end": rfc3339(origin + Duration::from_secs(149))}),
    )
    .await;
    let kept = hundred["samples"].as_array().expect("samples");
    assert!(kept.len() <= 100, "the default cap: {}", kept.len());
    assert_eq!(hundred["truncated"], true);
    let values: Vec<Option<f64>> = kept.iter().map(|sample| sample["value"].as_f64()).collect();
    for value in [50.0, 60.0, 97.0] {
        assert!(values.contains(&Some(value)), "{value} in {values:?}");
    }
    let ten = ok(&runtime, "runtime_get_tag_history", window(10)).await;
    let times: Vec<SystemTime> = ten["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .map(|sample| humantime::parse_rfc3339(sample["time"].as_str().expect("time")).expect("rfc 3339"))
        .collect();
    assert!((2..=10).contains(&times.len()), "{times:?}");
    let spanned = times[times.len() - 1]
        .duration_since(times[0])
        .expect("ascending");
    assert!(
        spanned >= Duration::from_secs(140),
        "over the window, not its first ten samples: {spanned:?}"
    );

    // The seeded last hour (one sample every 30 s, compressed within the deviation).
    let hour = ok(
        &runtime,
        "runtime_get_tag_history",
        json!({"tag": "Plant/Area1/Tank1/Level"}),
    )
    .await;
    assert!(
        hour["totalSamples"].as_u64().is_some_and(|total| total >= 2),
        "{hour}"
    );
    assert_eq!(hour["truncated"], false);
    let text = ok(&runtime, "runtime_get_tag_history", json!({"tag": "Pump1.Mode"})).await;
    assert_eq!(
        (text["totalSamples"].as_u64(), &text["stats"]),
        (Some(0), &Value::Null)
    );
}

#[tokio::test]
async fn excursions_past_a_limit_are_found_with_their_duration_and_peak() {
    let (_solution, runtime) = demo();
    let origin = SystemTime::now() - Duration::from_secs(4 * 3600);
    // Tank 1 at 60 %, over 85 % for a minute (peaking at 93), back, then over again for ten seconds.
    let series = [
        (0, 60.0),
        (100, 80.0),
        (110, 90.0),
        (140, 93.0),
        (170, 90.0),
        (180, 80.0),
        (400, 80.0),
        (410, 86.0),
        (415, 86.5),
        (420, 84.0),
    ];
    for (second, value) in series {
        tank1_level_at(&runtime, origin + Duration::from_secs(second), value);
    }
    let found = ok(
        &runtime,
        "runtime_find_excursions",
        json!({"tag": "Tank1.Level", "above": 85, "start": rfc3339(origin), "end": rfc3339(origin + Duration::from_secs(600))}),
    )
    .await;
    assert_eq!(found["condition"], "above 85");
    assert_eq!(found["totalExcursions"], 2);
    let excursions = found["excursions"].as_array().expect("excursions");
    // Newest first: 408.3 s to 418 s, then 105 s to 175 s (crossings on the line between samples).
    assert_eq!(
        (
            excursions[0]["durationS"].as_u64(),
            excursions[0]["peak"].as_f64()
        ),
        (Some(9), Some(86.5))
    );
    assert_eq!(
        (
            excursions[1]["durationS"].as_u64(),
            excursions[1]["peak"].as_f64()
        ),
        (Some(70), Some(93.0))
    );
    let refused = failure(&runtime, "runtime_find_excursions", json!({"tag": "Tank1.Level"})).await;
    assert!(refused.message.contains("give one limit"), "{refused:?}");
    let text = failure(
        &runtime,
        "runtime_find_excursions",
        json!({"tag": "Pump1.Mode", "above": 1}),
    )
    .await;
    assert!(text.message.contains("not a numeric tag"), "{text:?}");
}

#[tokio::test]
async fn values_at_an_instant_are_each_tags_last_recorded_sample_before_it() {
    let (_solution, runtime) = demo();
    let origin = SystemTime::now() - Duration::from_secs(6 * 3600);
    tank1_level_at(&runtime, origin, 40.0);
    tank1_level_at(&runtime, origin + Duration::from_secs(60), 70.0);
    tank1_level_at(&runtime, origin + Duration::from_secs(120), 20.0);
    let instant = origin + Duration::from_secs(90);
    let read = ok(
        &runtime,
        "runtime_get_values_at",
        json!({"tags": ["Tank1.Level", "Plant/Area1/Pump1/Mode"], "time": rfc3339(instant)}),
    )
    .await;
    let values = read["values"].as_array().expect("values");
    assert_eq!(
        (&values[0]["tag"], &values[0]["value"], &values[0]["units"]),
        (&json!("Tank1.Level"), &json!(70.0), &json!("%")),
        "the level as last recorded before the instant: {read}"
    );
    assert_eq!(values[0]["recorded"], rfc3339(origin + Duration::from_secs(60)));
    // Six hours ago is before the demo's seeded history: the mode has nothing recorded then.
    assert_eq!(values[1]["tag"], "Pump1.Mode");
    assert_eq!(
        values[1]["note"],
        "nothing recorded in the day before the instant"
    );
    let none = failure(
        &runtime,
        "runtime_get_values_at",
        json!({"tags": [], "time": rfc3339(instant)}),
    )
    .await;
    assert!(none.message.contains("tags"), "{none:?}");
    let untimed = failure(
        &runtime,
        "runtime_get_values_at",
        json!({"tags": ["Tank1.Level"]}),
    )
    .await;
    assert!(untimed.message.contains("time is required"), "{untimed:?}");
    let unknown = failure(
        &runtime,
        "runtime_get_values_at",
        json!({"tags": ["No.Such"], "time": rfc3339(instant)}),
    )
    .await;
    assert_eq!(unknown.kind, "not_found", "{unknown:?}");
}

#[tokio::test]
async fn custom_tools_register_under_bit_0x20_and_validate_their_arguments() {
    let (_solution, runtime) = demo();
    runtime
        .register_custom_tool(
            "line_speed",
            "The conveyor line speed for a line number.",
            json!({"type": "object", "required": ["line"], "additionalProperties": false,
                   "properties": {"line": {"type": "integer", "minimum": 1, "maximum": 4}}}),
            |arguments| async move { Ok(json!({"line": arguments["line"], "speed": 1.25, "units": "m/s"})) },
        )
        .expect("registers");
    assert_eq!(
        runtime.register_custom_tool("line_speed", "again", json!({"type": "object"}), |_| async {
            Ok(json!(null))
        }),
        Err(RegistrationError::Duplicate("line_speed".into()))
    );
    assert!(matches!(
        runtime.register_custom_tool(
            "runtime_get_value",
            "shadow",
            json!({"type": "object"}),
            |_| async { Ok(json!(null)) }
        ),
        Err(RegistrationError::Reserved(_))
    ));
    let offered = |bits: u32| -> bool {
        runtime
            .tools()
            .offered(ModelOptions::new(bits))
            .iter()
            .any(|tool| tool.name() == "line_speed")
    };
    assert!(offered(0x02 | 0x20));
    assert!(!offered(0x02 | 0x04 | 0x08 | 0x10));
    assert!(!offered(0x20));
    assert_eq!(
        ok(&runtime, "line_speed", json!({"line": 2})).await["speed"],
        1.25
    );
    let error = failure(&runtime, "line_speed", json!({"line": 9})).await;
    assert_eq!(error.kind, "invalid_arguments");
}

#[tokio::test]
async fn results_stay_within_the_size_bound_on_a_large_plant() {
    let solution = Solution::demo();
    {
        let connection = rusqlite::Connection::open(&solution.path).expect("opens");
        let description = "a long description of a bulk measurement point ".repeat(20);
        for index in 0..400 {
            connection
                .execute(
                    "INSERT INTO Tags (Name, Path, Type, Units, Description, InitialValue)
                     VALUES (?1, ?2, 'number', 'kPa', ?3, '1.5')",
                    rusqlite::params![
                        format!("Bulk{index:03}.Pressure"),
                        format!("Plant/Bulk/Line{}/Bulk{index:03}/Pressure", index % 4),
                        description
                    ],
                )
                .expect("insert");
            connection
                .execute(
                    "INSERT INTO Tags (Name, Path, Type, Units, Description, InitialValue)
                     VALUES (?1, ?2, 'number', 'kPa', ?3, '2.5')",
                    rusqlite::params![
                        format!("Flat.Point{index:03}"),
                        format!("Plant/Flat/Point{index:03}"),
                        description
                    ],
                )
                .expect("insert");
        }
    }
    let runtime = Runtime::open(&solution.path).expect("opens");
    for (tool, arguments) in [
        ("runtime_search_uns", json!({"query": "bulk", "max_results": 100})),
        (
            "runtime_list_instances",
            json!({"name_mask": "Bulk*", "max_results": 500}),
        ),
        (
            "runtime_browse_object_model",
            json!({"path": "Plant/Flat", "max_results": 200}),
        ),
        ("runtime_describe_object", json!({"path": "Plant/Flat"})),
    ] {
        let result = ok(&runtime, tool, arguments).await;
        let size = serde_json::to_vec(&result).expect("json").len();
        assert!(size <= MAX_RESULT_BYTES, "{tool}: {size} bytes");
        assert_eq!(result["truncated"], true, "{tool} says it was cut");
    }
}

#[test]
fn runtime_settings_are_admin_editable_and_checked() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8");
    assert_eq!(
        admin(&["settings", path, "get", "SimulatorEnabled"], ""),
        "true\n"
    );
    admin(&["settings", path, "set", "SimulatorEnabled", "off"], "");
    admin(&["settings", path, "set", "HistoryRetentionHours", "24"], "");
    let shown = admin(&["settings", path, "show"], "");
    assert!(shown.contains("SimulatorEnabled = false"), "{shown}");
    assert!(shown.contains("HistoryRetentionHours = 24"), "{shown}");
    let refused = crate::support::try_admin(&["settings", path, "set", "HistoryRetentionHours", "0"], "")
        .expect_err("zero hours");
    assert!(refused.to_string().contains("HistoryRetentionHours"), "{refused}");
    admin(&["settings", path, "unset", "HistoryRetentionHours"], "");
    let runtime = Runtime::open(&solution.path).expect("opens");
    assert!(!runtime.settings().simulator_enabled);
    assert_eq!(
        runtime.settings().history_retention,
        Duration::from_secs(168 * 3600)
    );
}
