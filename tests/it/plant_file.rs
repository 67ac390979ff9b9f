//! The plant model file end to end: `tserver plant import|export|show|purge-history` on real
//! solution files, errors that name their line and field and change nothing, the round trip,
//! the larger example, and a running server picking an import up.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use service_client::{Client, ClientOptions, TagValue};

use crate::support::{ServerProcess, Solution, admin, try_admin};

/// A file of the repository's `examples/plants`.
fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/plants")
        .join(name)
}

fn path_of(solution: &Solution) -> &str {
    solution.path.to_str().expect("utf-8 path")
}

/// The plant exported as TOML text.
fn export(solution: &Solution) -> String {
    admin(&["plant", path_of(solution), "export"], "")
}

/// Writes `text` next to the solution and returns its path.
fn plant_file(solution: &Solution, name: &str, text: &str) -> String {
    let path = solution.path.with_file_name(name);
    std::fs::write(&path, text).expect("writes the plant file");
    path.to_str().expect("utf-8 path").to_owned()
}

fn history_rows(solution: &Solution, tag: &str) -> i64 {
    let store = store::Store::open_file(&solution.path).expect("opens");
    let everything = (
        std::time::UNIX_EPOCH,
        std::time::SystemTime::now() + Duration::from_secs(86_400),
    );
    let page = store
        .tag_history_blocking(tag, plant_model::TagType::Number, everything, 1)
        .expect("reads");
    i64::try_from(page.total).expect("a count")
}

#[test]
fn an_import_with_mistakes_names_each_at_its_line_and_field_and_changes_nothing() {
    let solution = Solution::demo();
    let before = export(&solution);
    let broken = before
        .replacen("limit = 25.0", "limit = \"25\"", 1)
        .replacen("unit = \"A\"", "units = \"A\"", 1)
        .replacen("tag = \"Tank1.Level\"", "tag = \"Tank1.Levl\"", 1);
    let file = plant_file(&solution, "broken.toml", &broken);
    let error = try_admin(&["plant", path_of(&solution), "import", &file], "")
        .expect_err("refused")
        .to_string();
    let line_of = |needle: &str| {
        broken
            .lines()
            .position(|line| line.contains(needle))
            .map(|i| i + 1)
    };
    let units = line_of("units = \"A\"").expect("the typo is in the file");
    let limit = line_of("limit = \"25\"").expect("the bad limit is in the file");
    assert!(
        error.contains(&format!(
            "broken.toml:{units}:1: tags[0].units: unknown key (did you mean `unit`?)"
        )),
        "{error}"
    );
    assert!(
        error.contains(&format!(
            "broken.toml:{limit}:9: alarms[0].limit: expected a number, found a string"
        )),
        "{error}"
    );
    assert!(
        error.ends_with("nothing changed: fix the errors above and import again"),
        "{error}"
    );
    // Every problem at once: the unknown tag too, beside the mistakes of shape.
    let levl = line_of("Tank1.Levl").expect("the unknown tag is in the file");
    assert!(
        error.contains(&format!(
            "broken.toml:{levl}:7: alarms[6].tag: no tag named \"Tank1.Levl\" (did you mean \"Tank1.Level\"?)"
        )),
        "{error}"
    );
    let typo_only = before.replacen("tag = \"Tank1.Level\"", "tag = \"Tank1.Levl\"", 1);
    let file = plant_file(&solution, "typo.toml", &typo_only);
    let error = try_admin(&["plant", path_of(&solution), "import", &file], "")
        .expect_err("refused")
        .to_string();
    let tag_line = typo_only
        .lines()
        .position(|line| line.contains("Tank1.Levl"))
        .map(|i| i + 1)
        .expect("in the file");
    assert!(
        error.contains(&format!(
            "typo.toml:{tag_line}:7: alarms[6].tag: no tag named \"Tank1.Levl\" (did you mean \"Tank1.Level\"?)"
        )),
        "{error}"
    );
    assert_eq!(export(&solution), before, "nothing changed");
    assert!(admin(&["plant", path_of(&solution), "show"], "").contains("revision 1:"));
    // Not a plant file at all, and a file that is not there.
    let file = plant_file(&solution, "notes.json", "{\"tags\": 3}");
    let error = try_admin(&["plant", path_of(&solution), "import", &file], "")
        .expect_err("refused")
        .to_string();
    assert!(
        error.contains("notes.json:1:10: tags: expected an array of tables, found an integer"),
        "{error}"
    );
    let missing = solution.path.with_file_name("missing.toml");
    let error = try_admin(
        &[
            "plant",
            path_of(&solution),
            "import",
            missing.to_str().expect("utf-8"),
        ],
        "",
    )
    .expect_err("refused")
    .to_string();
    assert!(
        error.contains("cannot read") && error.contains("missing.toml"),
        "{error}"
    );
}

#[test]
fn export_then_import_is_no_change_and_a_reimport_says_what_it_adds_changes_and_removes() {
    let solution = Solution::demo();
    let path = path_of(&solution);
    let exported = export(&solution);
    let same = plant_file(&solution, "same.toml", &exported);
    let output = admin(&["plant", path, "import", &same], "");
    assert!(output.starts_with("no changes"), "{output}");
    // Alarm responses go out and come back like every other field.
    assert!(
        exported.contains(
            "response = \"Stop Pump 1 and Pump 2, then check the Tank 1 inlet\"\ntime_to_respond = 120\n"
        ),
        "{exported}"
    );

    // Tank2.Temperature goes (with its alarm), Tank1.Level changes its unit, Tank3.Level comes.
    let model = plant_model::read(&exported, plant_model::Format::Toml, "same.toml").expect("reads");
    let mut edited = model.clone();
    edited.tags.retain(|tag| tag.name != "Tank2.Temperature");
    edited.alarms.retain(|alarm| alarm.tag != "Tank2.Temperature");
    let level = edited
        .tags
        .iter_mut()
        .find(|tag| tag.name == "Tank1.Level")
        .expect("in the demo");
    level.unit = "percent".to_owned();
    let mut added = level.clone();
    added.name = "Tank3.Level".to_owned();
    added.path = "Plant/Area2/Tank3/Level".to_owned();
    added.simulate = None;
    edited.tags.push(added);
    let file = plant_file(&solution, "edited.toml", &edited.to_toml().expect("writes"));
    assert!(
        history_rows(&solution, "Tank2.Temperature") > 0,
        "the demo seeded history"
    );

    let dry = admin(&["plant", path, "import", &file, "--dry-run"], "");
    let expected_lines = [
        "tags: 1 would be added, 1 would be changed, 1 would be removed",
        "  + Tank3.Level",
        "  ~ Tank1.Level",
        "  - Tank2.Temperature",
        "alarms: 0 would be added, 0 would be changed, 1 would be removed",
        "  - Tank2.Temperature.Hi",
    ];
    for line in expected_lines {
        assert!(dry.lines().any(|printed| printed == line), "{line:?} in\n{dry}");
    }
    assert!(dry.ends_with("nothing changed (dry run)\n"), "{dry}");
    assert_eq!(export(&solution), exported, "a dry run changes nothing");

    let done = admin(&["plant", path, "import", &file], "");
    assert!(
        done.contains("  + Tank3.Level") && done.contains("purge-history"),
        "{done}"
    );
    let now = plant_model::read(&export(&solution), plant_model::Format::Toml, "now").expect("reads");
    assert_eq!(now, edited, "the solution holds the imported model");
    assert!(admin(&["plant", path, "show"], "").contains("revision 2:"));

    // The removed tag's history stays until purged; a tag in the plant cannot be purged.
    assert!(history_rows(&solution, "Tank2.Temperature") > 0);
    let purged = admin(&["plant", path, "purge-history", "Tank2.Temperature"], "");
    assert!(purged.starts_with("deleted "), "{purged}");
    assert_eq!(history_rows(&solution, "Tank2.Temperature"), 0);
    let refused = try_admin(&["plant", path, "purge-history", "Tank1.Level"], "")
        .expect_err("refused")
        .to_string();
    assert!(refused.contains("still in the plant"), "{refused}");
}

#[test]
fn the_water_treatment_example_imports_hundreds_of_tags_and_round_trips_as_toml_and_json() {
    let solution = Solution::empty();
    let path = path_of(&solution);
    let file = example("water-treatment.toml");
    let output = admin(&["plant", path, "import", file.to_str().expect("utf-8")], "");
    assert!(
        output.starts_with("tags: 315 added, 0 changed, 0 removed"),
        "{output}"
    );
    let shown = admin(&["plant", path, "show"], "");
    assert!(
        shown.contains("315 tags") && shown.contains("57 equipment of 6 types"),
        "{shown}"
    );
    assert!(
        shown.contains("  Filter07 (Filter) at Plant/Filtration/Filter07"),
        "{shown}"
    );
    let exported = export(&solution);
    let again = plant_file(&solution, "again.toml", &exported);
    assert!(admin(&["plant", path, "import", &again], "").starts_with("no changes"));
    let model = plant_model::read(&exported, plant_model::Format::Toml, "again.toml").expect("reads");
    let json = plant_file(&solution, "again.json", &model.to_json().expect("json"));
    assert!(admin(&["plant", path, "import", &json], "").starts_with("no changes"));
    // Instances expand with their overrides.
    let runtime = tserver::Runtime::open(&solution.path).expect("opens");
    let objects = runtime.objects();
    let tag = objects.tag("Filter07.DifferentialPressure").expect("expanded");
    assert_eq!(
        tag.definition().path,
        "Plant/Filtration/Filter07/DifferentialPressure"
    );
    assert_eq!(tag.definition().description, "Filter 7 headloss across the media");
    assert!(
        objects
            .tag("Plant/Filtration/Filter07/BackwashRequest")
            .expect("by path")
            .definition()
            .writable
    );
    let limit = objects
        .alarms()
        .iter()
        .find(|alarm| alarm.definition().name == "Filter07.DifferentialPressure.Hi")
        .expect("expanded")
        .definition()
        .limit;
    assert_eq!(limit, 230.0, "the instance's own limit");
}

async fn read_value(client: &Client, tag: &str) -> Option<TagValue> {
    let reading = client.read_tags(&[tag]).await.expect("read").remove(0);
    if reading.error.is_empty() {
        reading.value
    } else {
        None
    }
}

#[tokio::test]
async fn a_running_server_picks_up_an_import_and_keeps_the_live_values_of_tags_that_stay() {
    let solution = Solution::demo();
    let path = path_of(&solution).to_owned();
    let server = ServerProcess::start(&solution.path, &[], &[]);
    let client = Client::connect(server.addr, ClientOptions::default())
        .await
        .expect("connects");
    client.login("guest", "").await.expect("logs in");
    assert_eq!(
        read_value(&client, "Tank3.Level").await,
        None,
        "not yet in the plant"
    );
    let mut subscription = client
        .subscribe(service_client::SubscribeRequest {
            names: vec!["Pump2.Running".to_owned()],
            ..service_client::SubscribeRequest::default()
        })
        .await
        .expect("subscribed");

    let mut model = plant_model::read(&export(&solution), plant_model::Format::Toml, "demo").expect("reads");
    let mut tank3 = model
        .tags
        .iter()
        .find(|tag| tag.name == "Tank1.Level")
        .expect("in the demo")
        .clone();
    tank3.name = "Tank3.Level".to_owned();
    tank3.path = "Plant/Area2/Tank3/Level".to_owned();
    tank3.initial = Some(plant_model::InitialValue::Number(12.5));
    tank3.simulate = None;
    model.tags.push(tank3);
    model.tags.retain(|tag| tag.name != "Pump2.Running");
    let file = plant_file(&solution, "more.toml", &model.to_toml().expect("writes"));
    let pump1_before = read_value(&client, "Pump1.Mode").await;
    admin(&["plant", &path, "import", &file], "");

    let deadline = Instant::now() + Duration::from_secs(10);
    while read_value(&client, "Tank3.Level").await.is_none() {
        assert!(Instant::now() < deadline, "the server did not pick the import up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        read_value(&client, "Tank3.Level").await,
        Some(TagValue::Number(12.5))
    );
    assert_eq!(read_value(&client, "Pump2.Running").await, None, "removed");
    assert_eq!(
        read_value(&client, "Pump1.Mode").await,
        pump1_before,
        "a tag that stays keeps its value"
    );
    assert!(
        server
            .log()
            .lines
            .iter()
            .any(|line| line.contains("plant reloaded after an import")),
        "the reload is logged"
    );
    // A subscription follows the reload: the removed tag comes once more, with its error.
    let update = tokio::time::timeout(Duration::from_secs(10), subscription.next_update())
        .await
        .expect("an update")
        .expect("open");
    assert_eq!(
        (
            update.readings[0].name.as_str(),
            update.readings[0].error.as_str()
        ),
        ("Pump2.Running", "unknown tag")
    );
}

/// A boiler whose temperature starts past its high limit and whose pressure does not.
pub(crate) const BOILER: &str = r#"
[[tags]]
name = "Boiler.Temp"
path = "Plant/Boiler/Temp"
type = "number"
initial = 100.0
writable = true

[[tags]]
name = "Boiler.Pressure"
path = "Plant/Boiler/Pressure"
type = "number"
initial = 5.0

[[alarms]]
name = "Boiler.Temp.Hi"
tag = "Boiler.Temp"
condition = "Hi"
limit = 92

[[alarms]]
name = "Boiler.Pressure.Hi"
tag = "Boiler.Pressure"
condition = "Hi"
limit = 10
"#;

/// A client of `server`, logged in as the demo's guest.
async fn guest_of(server: &ServerProcess) -> Client {
    let client = Client::connect(server.addr, ClientOptions::default())
        .await
        .expect("connects");
    client.login("guest", "").await.expect("logs in");
    client
}

/// [`BOILER`] with what to know and do about its temperature alarm.
pub(crate) fn guided_boiler() -> String {
    BOILER.replacen(
        "limit = 92\n",
        "limit = 92\ncause = \"Burner stuck on\"\nconsequence = \"Relief valve lifts\"\n\
         response = \"Trip the burner\"\ntime_to_respond = 300\n",
        1,
    )
}

/// The state of each alarm below `folder`, by name, as a panel's subscription first sees it.
pub(crate) async fn alarm_states(
    client: &Client,
    folder: &str,
) -> std::collections::BTreeMap<String, String> {
    let subscription = client
        .subscribe(service_client::SubscribeRequest {
            folder: folder.to_owned(),
            alarms: true,
            ..service_client::SubscribeRequest::default()
        })
        .await
        .expect("subscribed");
    let states = subscription
        .initial()
        .alarms
        .iter()
        .map(|alarm| (alarm.name.clone(), alarm.state.clone()))
        .collect();
    subscription.unsubscribe().await.expect("unsubscribed");
    states
}

fn alarm_events(solution: &Solution, alarm: &str) -> Vec<String> {
    let connection = rusqlite::Connection::open(&solution.path).expect("opens");
    let mut query = connection
        .prepare("SELECT Event FROM AlarmHistory WHERE Alarm = ?1 ORDER BY Id")
        .expect("prepares");
    query
        .query_map([alarm], |row| row.get(0))
        .expect("queries")
        .collect::<Result<_, _>>()
        .expect("reads")
}

#[tokio::test]
async fn an_alarm_past_its_limit_at_startup_is_raised_and_its_acknowledgement_survives_a_restart() {
    use crate::support::TestServer;
    let solution = Solution::demo();
    let file = plant_file(&solution, "boiler.toml", BOILER);
    admin(&["plant", path_of(&solution), "import", &file], "");

    let server = TestServer::start(&solution.path, tserver::ServerConfig::default()).await;
    let client = server.guest().await;
    let states = alarm_states(&client, "Plant/Boiler").await;
    assert_eq!(
        states["Boiler.Temp.Hi"], "active",
        "100 is past 92 from the start"
    );
    assert_eq!(states["Boiler.Pressure.Hi"], "normal");
    assert!(
        client
            .acknowledge_alarm("Boiler.Temp.Hi")
            .await
            .expect("acknowledges")
    );
    // The real server flushes its history on the way out (`run_background`'s last flush).
    server.runtime.plant().historian().flush().expect("flushes");
    drop(client);
    server.stop().await;

    let server = TestServer::start(&solution.path, tserver::ServerConfig::default()).await;
    let client = server.guest().await;
    let states = alarm_states(&client, "Plant/Boiler").await;
    assert_eq!(
        states["Boiler.Temp.Hi"], "acknowledged",
        "a restart does not ask again for an acknowledgement already given"
    );
    server.runtime.plant().historian().flush().expect("flushes");
    assert_eq!(
        alarm_events(&solution, "Boiler.Temp.Hi"),
        ["Active", "Acknowledged"],
        "one trip, recorded once, however often the server starts"
    );
    server.stop().await;
}

#[tokio::test]
async fn an_alarm_cleared_unacknowledged_is_still_listed_after_a_restart() {
    use crate::support::TestServer;
    let solution = Solution::demo();
    let file = plant_file(&solution, "boiler.toml", BOILER);
    admin(&["plant", path_of(&solution), "import", &file], "");
    let server = TestServer::start(&solution.path, tserver::ServerConfig::default()).await;
    let client = server.guest().await;
    let written = client
        .write_tags(vec![service_client::TagWrite {
            name: "Boiler.Temp".to_owned(),
            value: Some(service_client::WriteValue::Number(50.0)),
        }])
        .await
        .expect("writes");
    assert!(written[0].error.is_empty(), "{written:?}");
    assert_eq!(
        alarm_states(&client, "Plant/Boiler").await["Boiler.Temp.Hi"],
        "normal-unacked"
    );
    server.runtime.plant().historian().flush().expect("flushes");
    drop(client);
    server.stop().await;

    let server = TestServer::start(&solution.path, tserver::ServerConfig::default()).await;
    let client = server.guest().await;
    // The temperature is back at its initial 100: the alarm trips again, unacknowledged.
    assert_eq!(
        alarm_states(&client, "Plant/Boiler").await["Boiler.Temp.Hi"],
        "active"
    );
    server.runtime.plant().historian().flush().expect("flushes");
    assert_eq!(
        alarm_events(&solution, "Boiler.Temp.Hi"),
        ["Active", "Cleared", "Active"]
    );
    server.stop().await;
}

#[tokio::test]
async fn an_import_raises_the_alarms_its_new_definitions_and_initial_values_are_past() {
    let solution = Solution::demo();
    let path = path_of(&solution).to_owned();
    let file = plant_file(&solution, "boiler.toml", BOILER);
    admin(&["plant", &path, "import", &file], "");
    let server = ServerProcess::start(&solution.path, &[], &[]);
    let client = guest_of(&server).await;
    assert_eq!(
        alarm_states(&client, "Plant/Boiler").await["Boiler.Pressure.Hi"],
        "normal"
    );

    // The pressure alarm's limit comes down below the value, and a new tag starts past a new
    // alarm's limit.
    let changed = BOILER.replacen("limit = 10", "limit = 4", 1)
        + r#"
[[tags]]
name = "Boiler.Level"
path = "Plant/Boiler/Level"
type = "number"
initial = 2.0

[[alarms]]
name = "Boiler.Level.Lo"
tag = "Boiler.Level"
condition = "Lo"
limit = 10
"#;
    let file = plant_file(&solution, "boiler2.toml", &changed);
    admin(&["plant", &path, "import", &file], "");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let states = alarm_states(&client, "Plant/Boiler").await;
        if states.contains_key("Boiler.Level.Lo") {
            assert_eq!(states["Boiler.Level.Lo"], "active", "{states:?}");
            assert_eq!(states["Boiler.Pressure.Hi"], "active", "{states:?}");
            assert_eq!(states["Boiler.Temp.Hi"], "active", "kept as it was: {states:?}");
            break;
        }
        assert!(Instant::now() < deadline, "the server did not pick the import up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The alarm `name` as the Alarms call lists it, if it is not normal.
async fn listed_alarm(client: &Client, name: &str) -> Option<service_client::AlarmDetail> {
    client
        .alarms(service_client::AlarmsRequest::default())
        .await
        .expect("lists alarms")
        .active
        .into_iter()
        .find(|alarm| alarm.name == name)
}

#[tokio::test]
async fn a_reimport_that_only_rewords_an_alarms_response_keeps_it_standing_with_the_new_words() {
    let solution = Solution::demo();
    let path = path_of(&solution).to_owned();
    let guided = guided_boiler();
    let file = plant_file(&solution, "boiler.toml", &guided);
    admin(&["plant", &path, "import", &file], "");
    let server = ServerProcess::start(&solution.path, &[], &[]);
    let client = guest_of(&server).await;
    let alarm = listed_alarm(&client, "Boiler.Temp.Hi")
        .await
        .expect("past its limit");
    assert_eq!(
        (
            alarm.cause.as_str(),
            alarm.consequence.as_str(),
            alarm.response.as_str(),
            alarm.time_to_respond_s
        ),
        (
            "Burner stuck on",
            "Relief valve lifts",
            "Trip the burner",
            Some(300)
        )
    );
    let pressure = alarm_states(&client, "Plant/Boiler").await;
    assert_eq!(pressure["Boiler.Pressure.Hi"], "normal");
    assert!(
        client
            .acknowledge_alarm("Boiler.Temp.Hi")
            .await
            .expect("acknowledges")
    );

    let reworded = guided
        .replacen("Trip the burner", "Close the fuel valve, then trip the burner", 1)
        .replacen("time_to_respond = 300", "time_to_respond = 120", 1);
    let file = plant_file(&solution, "boiler2.toml", &reworded);
    admin(&["plant", &path, "import", &file], "");
    let deadline = Instant::now() + Duration::from_secs(10);
    let alarm = loop {
        let alarm = listed_alarm(&client, "Boiler.Temp.Hi")
            .await
            .expect("still listed");
        if alarm.response != "Trip the burner" {
            break alarm;
        }
        assert!(Instant::now() < deadline, "the server did not pick the import up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        (alarm.response.as_str(), alarm.time_to_respond_s),
        ("Close the fuel valve, then trip the burner", Some(120))
    );
    assert_eq!(
        (alarm.state.as_str(), alarm.acknowledged_by.as_str()),
        ("acknowledged", "guest"),
        "new words for the same alarm: its acknowledgement stands"
    );
}

#[tokio::test]
async fn standing_alarms_with_long_guidance_are_listed_as_many_as_fit_in_a_frame() {
    use crate::support::TestServer;
    use std::fmt::Write as _;
    let solution = Solution::demo();
    let long = "Walk the line and check every flange. ".repeat(52);
    let mut plant = String::new();
    for n in 0..20 {
        write!(
            plant,
            "[[tags]]\nname = \"T{n}\"\npath = \"Plant/T{n}\"\ntype = \"number\"\ninitial = 100\n\n\
             [[alarms]]\nname = \"T{n}.Hi\"\ntag = \"T{n}\"\ncondition = \"Hi\"\nlimit = 50\n\
             cause = \"{long}\"\nconsequence = \"{long}\"\nresponse = \"{long}\"\n\n"
        )
        .expect("writes");
    }
    let file = plant_file(&solution, "flood.toml", &plant);
    admin(&["plant", path_of(&solution), "import", &file], "");
    let max_frame = 64 * 1024;
    let config = tserver::ServerConfig::default().with_max_frame(max_frame);
    let server = TestServer::start(&solution.path, config).await;
    let client = server.guest().await;
    for history in [false, true] {
        let reply = client
            .alarms(service_client::AlarmsRequest {
                history,
                ..service_client::AlarmsRequest::default()
            })
            .await
            .expect("a reply that fits its frame");
        let listed = reply.active.len();
        assert!(reply.active_truncated, "20 alarms of 6 KB do not fit in 64 KB");
        assert!(
            (2..20).contains(&listed),
            "as many as fit: {listed} (history {history})"
        );
        assert_eq!(reply.active[0].response, long, "each listed whole");
    }
    server.stop().await;
}

#[test]
fn an_instance_override_outside_its_types_range_is_refused_at_its_own_place() {
    let solution = Solution::demo();
    let before = export(&solution);
    let text = r#"
[[types]]
name = "Compressor"
  [[types.tags]]
  name = "DischargeTemp"
  type = "number"
  min = 0
  max = 130

[[equipment]]
name = "K1"
type = "Compressor"
path = "Plant/K1"
initial = { DischargeTemp = 190.0 }
"#;
    let file = plant_file(&solution, "compressor.toml", text);
    let error = try_admin(&["plant", path_of(&solution), "import", &file], "")
        .expect_err("refused")
        .to_string();
    assert!(
        error.contains(
            "compressor.toml:14:29: equipment[0].initial.DischargeTemp: 190 is outside DischargeTemp's range 0..130 (type \"Compressor\")"
        ),
        "{error}"
    );
    assert_eq!(export(&solution), before, "nothing changed");
}

/// A plant file is a regular file: a device would never end and a FIFO without a writer would
/// block the import for ever, so both are refused before they are opened.
#[test]
fn an_import_refuses_a_device_or_a_fifo_at_once() {
    let solution = Solution::demo();
    let error = try_admin(&["plant", path_of(&solution), "import", "/dev/zero"], "")
        .expect_err("refused")
        .to_string();
    assert_eq!(error, "cannot read /dev/zero: is a device, not a regular file");

    // A FIFO nobody writes to: opening it to read would wait for a writer for ever.
    let fifo = solution.path.with_file_name("waiting.toml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs (coreutils)");
    assert!(made.success(), "mkfifo makes the FIFO");
    let shown = fifo.to_str().expect("utf-8 path").to_owned();
    let (sender, receiver) = std::sync::mpsc::channel();
    let solution_path = path_of(&solution).to_owned();
    std::thread::spawn(move || {
        let said =
            try_admin(&["plant", &solution_path, "import", &shown], "").map_err(|error| error.to_string());
        sender.send(said).ok();
    });
    let error = receiver
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the import answers instead of waiting for a writer")
        .expect_err("refused");
    assert!(
        error.ends_with("waiting.toml: is a FIFO, not a regular file"),
        "{error}"
    );
}

#[test]
fn a_small_file_that_expands_past_the_tag_bound_is_refused_and_changes_nothing() {
    let solution = Solution::demo();
    let before = export(&solution);
    // 1,000 members times 1,000 instances: a million tags from a file of about 100 KB.
    let text = plant_model::fixtures::cells(1000, 1000);
    assert!(text.len() < 120_000, "{}", text.len());
    let file = plant_file(&solution, "million.toml", &text);
    for dry_run in [true, false] {
        let mut args = vec!["plant", path_of(&solution), "import", &file];
        if dry_run {
            args.push("--dry-run");
        }
        let error = try_admin(&args, "").expect_err("refused").to_string();
        assert!(
            error.contains(
                "equipment[100].type: the plant would have 1000000 tags (1000000 of equipment instances, 0 of its own); \
                 a plant may have at most 100000"
            ),
            "{error}"
        );
    }
    assert_eq!(export(&solution), before, "nothing changed");
}

#[tokio::test]
async fn names_are_one_form_and_case_beyond_ascii_and_hidden_characters_or_wildcards_are_refused() {
    let solution = Solution::demo();
    let path = path_of(&solution).to_owned();
    let before = export(&solution);
    // TOML's own escapes, so what each name holds is plain to see.
    let refused = r#"
[[sources]]
name = "site"
url = "mqtt://127.0.0.1:1883"

[[tags]]
name = "Tank\u202E1.Level"
path = "Plant/Tank1/Level"
type = "number"

[[tags]]
name = "Tank2.Level"
path = "Plant/Tank#2/Level"
type = "number"
source = { broker = "site" }
"#;
    let file = plant_file(&solution, "refused.toml", refused);
    let error = try_admin(&["plant", &path, "import", &file], "")
        .expect_err("refused")
        .to_string();
    assert!(
        error.contains(
            "refused.toml:7:8: tags[0].name: \"Tank\\u{202e}1.Level\" is not a usable name: character 5 is U+202E \
             (RIGHT-TO-LEFT OVERRIDE), which hides or reorders what a name shows"
        ),
        "{error}"
    );
    assert!(
        error.contains(
            "refused.toml:13:8: tags[1].path: path \"Plant/Tank#2/Level\" of tag \"Tank2.Level\" has the MQTT wildcard '#'"
        ),
        "{error}"
    );
    assert_eq!(export(&solution), before, "nothing changed");

    // A decomposed accent is stored composed, and found whatever the case and the form.
    let accepted = r#"
[[tags]]
name = "Cafe\u0301.Temp"
path = "Plant/Cafe\u0301/Temp"
type = "number"
initial = 21.5
"#;
    let file = plant_file(&solution, "accepted.toml", accepted);
    admin(&["plant", &path, "import", &file], "");
    assert!(
        export(&solution).contains("name = \"Caf\u{e9}.Temp\""),
        "stored in NFC"
    );
    let server = crate::support::TestServer::start(&solution.path, tserver::ServerConfig::default()).await;
    let client = server.guest().await;
    for asked in [
        "Caf\u{e9}.Temp",
        "CAFE\u{301}.TEMP",
        "caf\u{c9}.temp",
        "PLANT/CAF\u{c9}/TEMP",
    ] {
        assert_eq!(
            read_value(&client, asked).await,
            Some(TagValue::Number(21.5)),
            "{asked:?}"
        );
    }
    server.stop().await;
}

/// Case beyond Latin is one name: Greek (final sigma included) and Cyrillic names that differ
/// only in case are refused as taken, tags, paths and alarms alike, and a name is found
/// whatever its case.
#[tokio::test]
async fn names_that_differ_only_in_greek_or_cyrillic_case_are_one_name() {
    let solution = Solution::demo();
    let path = path_of(&solution).to_owned();
    let before = export(&solution);
    let mut twins = String::new();
    for (index, (upper, lower)) in [
        ("\u{3a3}.V", "\u{3c3}.V"),
        ("\u{391}\u{39b}\u{3a6}\u{391}.V", "\u{3b1}\u{3bb}\u{3c6}\u{3b1}.V"),
        (
            "\u{41d}\u{410}\u{421}\u{41e}\u{421}.V",
            "\u{43d}\u{430}\u{441}\u{43e}\u{441}.V",
        ),
        (
            "\u{3a3}\u{38a}\u{3a3}\u{3a5}\u{3a6}\u{39f}\u{3a3}.V",
            "\u{3c3}\u{3af}\u{3c3}\u{3c5}\u{3c6}\u{3bf}\u{3c2}.V",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        twins.push_str(&format!(
            "\n[[tags]]\nname = \"{upper}\"\npath = \"Plant/U{index}/V\"\ntype = \"number\"\n\
             \n[[tags]]\nname = \"{lower}\"\npath = \"Plant/L{index}/V\"\ntype = \"number\"\n"
        ));
    }
    twins.push_str(
        "\n[[tags]]\nname = \"P.A\"\npath = \"Plant/\u{3a3}\u{3a6}/A\"\ntype = \"number\"\n\
         \n[[tags]]\nname = \"P.B\"\npath = \"Plant/\u{3c3}\u{3c6}/A\"\ntype = \"number\"\n\
         \n[[alarms]]\nname = \"\u{3a3}\u{3a6}\"\ntag = \"P.A\"\ncondition = \"Hi\"\nlimit = 1\n\
         \n[[alarms]]\nname = \"\u{3c3}\u{3c6}\"\ntag = \"P.B\"\ncondition = \"Hi\"\nlimit = 1\n",
    );
    let file = plant_file(&solution, "twins.toml", &twins);
    let error = try_admin(&["plant", &path, "import", &file], "")
        .expect_err("refused")
        .to_string();
    for taken in [
        "tag name \"\u{3c3}.V\" is taken (by \"\u{3a3}.V\")",
        "tag name \"\u{3b1}\u{3bb}\u{3c6}\u{3b1}.V\" is taken",
        "tag name \"\u{43d}\u{430}\u{441}\u{43e}\u{441}.V\" is taken",
        "tag name \"\u{3c3}\u{3af}\u{3c3}\u{3c5}\u{3c6}\u{3bf}\u{3c2}.V\" is taken",
        "path \"Plant/\u{3c3}\u{3c6}/A\" is taken",
        "alarm name \"\u{3c3}\u{3c6}\" is taken",
    ] {
        assert!(error.contains(taken), "{taken}\n{error}");
    }
    assert_eq!(export(&solution), before, "nothing changed");

    let one = "\n[[tags]]\nname = \"\u{3a3}\u{38a}\u{3a3}\u{3a5}\u{3a6}\u{39f}\u{3a3}.V\"\npath = \"Plant/\u{3a3}/V\"\ntype = \"number\"\ninitial = 1.0\n";
    let file = plant_file(&solution, "one.toml", one);
    admin(&["plant", &path, "import", &file], "");
    let server = crate::support::TestServer::start(&solution.path, tserver::ServerConfig::default()).await;
    let client = server.guest().await;
    for asked in [
        "\u{3c3}\u{3af}\u{3c3}\u{3c5}\u{3c6}\u{3bf}\u{3c2}.V",
        "\u{3a3}\u{38a}\u{3a3}\u{3a5}\u{3a6}\u{39f}\u{3a3}.v",
        "PLANT/\u{3c3}/V",
    ] {
        assert_eq!(
            read_value(&client, asked).await,
            Some(TagValue::Number(1.0)),
            "{asked:?}"
        );
    }
    server.stop().await;
}

/// An import that only adds, changes or removes a source says so, and the same file again is
/// no change.
#[test]
fn an_import_that_only_changes_the_sources_says_so() {
    let solution = Solution::demo();
    let path = path_of(&solution).to_owned();
    let exported = export(&solution);
    let with_source = format!("{exported}\n[[sources]]\nname = \"site\"\nurl = \"mqtt://127.0.0.1:1883\"\n");
    let file = plant_file(&solution, "with-source.toml", &with_source);
    let said = admin(&["plant", &path, "import", &file], "");
    assert!(
        said.contains("sources: 1 added, 0 changed, 0 removed") && said.contains("  + site"),
        "{said}"
    );
    assert!(!said.contains("tags:"), "{said}");
    let again = admin(&["plant", &path, "import", &file], "");
    assert!(again.starts_with("no changes"), "{again}");
    let moved = with_source.replace("mqtt://127.0.0.1:1883", "mqtt://127.0.0.1:1884");
    let file = plant_file(&solution, "moved.toml", &moved);
    let said = admin(&["plant", &path, "import", &file], "");
    assert!(said.contains("  ~ site"), "{said}");
    let file = plant_file(&solution, "without.toml", &exported);
    let said = admin(&["plant", &path, "import", &file], "");
    assert!(said.contains("  - site"), "{said}");
}
