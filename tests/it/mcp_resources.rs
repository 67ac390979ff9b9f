//! RuntimeMCP's resources and prompts with a real MCP client (rmcp): the plant model, the
//! documents, the active alarms and the proposals listed and read under the tools' bits;
//! subscriptions told when alarms and proposals change; the built-in prompts and the site's
//! own from an import listed, rendered and their arguments completed from the plant.

use std::time::Duration;

use plant_model::{Quality, TagValue};
use rmcp::model::{
    ArgumentInfo, CallToolRequestParams, CompleteRequestParams, GetPromptRequestParams, Reference,
    ResourceContents, ResourceUpdatedNotificationParam, SubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Value, json};
use service_client::Decision;
use tokio::sync::mpsc;

use crate::mcp::{McpRig, arguments, content_of};
use crate::support::{PATIENCE, Solution, admin};

/// A client that hands over the URI of every resource updated.
#[derive(Debug, Clone)]
struct Watcher(mpsc::UnboundedSender<String>);

impl ClientHandler for Watcher {
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        let _ = self.0.send(params.uri);
    }
}

/// The demo, its simulator off so only the test changes the plant.
async fn rig() -> McpRig {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    admin(&["settings", &path, "set", "SimulatorEnabled", "off"], "");
    McpRig::serving(solution, tserver::http_surface::HttpConfig::default()).await
}

/// The text of the one content a read gives, with its MIME type.
async fn read<H: rmcp::service::Service<RoleClient>>(
    client: &RunningService<RoleClient, H>,
    uri: &str,
) -> (String, String) {
    let result = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
        .await
        .unwrap_or_else(|error| panic!("{uri} reads: {error}"));
    match &result.contents[..] {
        [
            ResourceContents::TextResourceContents {
                text,
                mime_type,
                uri: read,
                ..
            },
        ] => {
            assert_eq!(read, uri);
            (text.clone(), mime_type.clone().unwrap_or_default())
        }
        other => panic!("one text content, not {other:?}"),
    }
}

/// The next URI updated, within the patience.
async fn updated(updates: &mut mpsc::UnboundedReceiver<String>, what: &str) -> String {
    tokio::time::timeout(PATIENCE, updates.recv())
        .await
        .unwrap_or_else(|_| panic!("no update of {what} within {PATIENCE:?}"))
        .expect("the client runs")
}

#[tokio::test]
async fn the_plant_its_documents_alarms_and_proposals_are_resources_under_the_tools_bits() {
    let rig = rig().await;
    let client = rig.client().await;
    let resources = client.list_all_resources().await.expect("listed");
    let uris: Vec<&str> = resources.iter().map(|resource| resource.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "tserver://plant/model",
            "tserver://documents/procedures/pump-high-motor-current.md",
            "tserver://documents/procedures/tank-overfill.md",
            "tserver://alarms/active",
            "tserver://proposals/pending"
        ]
    );
    assert!(
        resources
            .iter()
            .all(|resource| resource.title.is_some() && resource.mime_type.is_some())
    );
    let templates = client.list_all_resource_templates().await.expect("listed");
    let templates: Vec<&str> = templates
        .iter()
        .map(|template| template.uri_template.as_str())
        .collect();
    assert_eq!(
        templates,
        ["tserver://plant/model/{+folder}", "tserver://proposals/{id}"]
    );

    // The plant model: every tag with its type, units, range and alarms.
    let (text, mime) = read(&client, "tserver://plant/model").await;
    assert_eq!(mime, "application/json");
    let model: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(model["truncated"], false);
    let tags = model["tags"].as_array().expect("tags");
    assert_eq!(tags.len(), rig.server.runtime.objects().len());
    let level = tags
        .iter()
        .find(|tag| tag["name"] == "Tank1.Level")
        .expect("Tank1.Level");
    assert_eq!(level["units"], "%");
    assert_eq!(level["type"], "number");
    assert!(
        level["alarms"]
            .as_array()
            .is_some_and(|alarms| alarms.contains(&json!("Tank1.Level.Hi"))),
        "{level}"
    );
    assert!(
        model["equipment"]
            .as_array()
            .is_some_and(|equipment| equipment.iter().any(|unit| unit["name"] == "Pump1"))
    );
    // A folder's part holds only what is below it.
    let pump = tags
        .iter()
        .find(|tag| tag["name"] == "Pump1.MotorCurrent")
        .expect("a pump tag")["path"]
        .as_str()
        .expect("a path")
        .rsplit_once('/')
        .expect("below a folder")
        .0
        .to_owned();
    let (text, _) = read(&client, &format!("tserver://plant/model/{pump}")).await;
    let part: Value = serde_json::from_str(&text).expect("JSON");
    let below = part["tags"].as_array().expect("tags");
    assert!(
        !below.is_empty()
            && below
                .iter()
                .all(|tag| tag["path"].as_str().is_some_and(|path| path.starts_with(&pump)))
    );
    let missing = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "tserver://plant/model/Nowhere",
        ))
        .await
        .expect_err("no such folder");
    assert!(
        missing.to_string().contains("tserver://plant/model/Nowhere"),
        "{missing}"
    );

    // A document is its text, Markdown by its name.
    let (text, mime) = read(&client, "tserver://documents/procedures/tank-overfill.md").await;
    assert_eq!(mime, "text/markdown");
    assert!(text.starts_with("# Tank overfill"), "{text}");

    // The active alarms read as the alarm tool answers; the proposals as their followers read them.
    rig.server
        .runtime
        .plant()
        .write("Tank1.Level", TagValue::Number(96.0), Quality::GOOD)
        .expect("written");
    let (text, _) = read(&client, "tserver://alarms/active").await;
    let alarms: Value = serde_json::from_str(&text).expect("JSON");
    let tool = client
        .call_tool(
            CallToolRequestParams::new("runtime_get_active_alarms")
                .with_arguments(arguments(json!({"max_results": 1000}))),
        )
        .await
        .expect("called");
    assert_eq!(alarms, content_of(&tool)["result"]);
    assert!(
        alarms["alarms"]
            .as_array()
            .is_some_and(|listed| listed.iter().any(|alarm| alarm["name"] == "Tank1.Level.Hi")),
        "{alarms}"
    );
    let (text, _) = read(&client, "tserver://proposals/pending").await;
    assert_eq!(
        serde_json::from_str::<Value>(&text).expect("JSON"),
        json!({"count": 0, "proposals": []})
    );

    // The bits close resources as they close the tools: UNS only.
    admin(
        &[
            "settings",
            &rig.server.runtime.store().location(),
            "set",
            "ModelOptions",
            "0x06",
        ],
        "",
    );
    let uns_only = client.list_all_resources().await.expect("listed");
    assert_eq!(uns_only.len(), 3, "the model and the two documents: {uns_only:?}");
    let closed = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "tserver://alarms/active",
        ))
        .await
        .expect_err("alarms are closed");
    assert!(closed.to_string().contains("no resource"), "{closed}");
    client.cancel().await.expect("closes");
    rig.stop().await;
}

#[tokio::test]
#[expect(
    deprecated,
    reason = "resources/subscribe is the subscription of MCP 2025-11-25, the version RuntimeMCP speaks"
)]
async fn a_subscriber_is_told_when_the_alarms_change_and_when_its_proposal_is_decided() {
    let rig = rig().await;
    let (sender, mut updates) = mpsc::unbounded_channel();
    let client = rig.client_with(Watcher(sender)).await;
    client
        .subscribe(SubscribeRequestParams::new("tserver://alarms/active"))
        .await
        .expect("subscribed");
    rig.server
        .runtime
        .plant()
        .write("Tank1.Level", TagValue::Number(97.0), Quality::GOOD)
        .expect("written");
    assert_eq!(
        updated(&mut updates, "the alarms").await,
        "tserver://alarms/active"
    );

    // A proposal made, then followed by its own resource to the decision.
    client
        .subscribe(SubscribeRequestParams::new("tserver://proposals/pending"))
        .await
        .expect("subscribed");
    let made = client
        .call_tool(
            CallToolRequestParams::new("runtime_propose_alarm_ack").with_arguments(arguments(
                json!({"alarm": "Tank1.Level.Hi", "reason": "the level is back under control"}),
            )),
        )
        .await
        .expect("proposed");
    let id = content_of(&made)["result"]["proposal"]
        .as_str()
        .expect("an id")
        .to_owned();
    assert_eq!(
        updated(&mut updates, "the pending proposals").await,
        "tserver://proposals/pending"
    );
    let own = format!("tserver://proposals/{id}");
    client
        .subscribe(SubscribeRequestParams::new(own.clone()))
        .await
        .expect("subscribed");
    client
        .unsubscribe(rmcp::model::UnsubscribeRequestParams::new(
            "tserver://alarms/active",
        ))
        .await
        .expect("unsubscribed");
    let operator = rig.server.guest().await;
    operator
        .decide_proposal(&id, Decision::Approve, "")
        .await
        .expect("approved");
    let mut told = Vec::new();
    while !told.contains(&own) {
        told.push(updated(&mut updates, "the decided proposal").await);
    }
    let (text, _) = read(&client, &own).await;
    let standing: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(
        (&standing["state"], &standing["decidedBy"]),
        (&json!("approved"), &json!("guest")),
        "{standing}"
    );
    // The acknowledgement changed the alarm, but nobody watches the alarms any more.
    tokio::time::sleep(Duration::from_millis(600)).await;
    while let Ok(uri) = updates.try_recv() {
        assert_ne!(uri, "tserver://alarms/active", "unsubscribed");
    }
    let refused = client
        .subscribe(SubscribeRequestParams::new("tserver://plant/model"))
        .await
        .expect_err("the model changes only with the plant file");
    assert!(
        refused.to_string().contains("changes only with the plant file"),
        "{refused}"
    );
    client.cancel().await.expect("closes");
    rig.stop().await;
}

#[tokio::test]
async fn prompts_are_listed_rendered_and_their_arguments_completed_from_the_plant() {
    let rig = rig().await;
    let client = rig.client().await;
    let prompts = client.list_all_prompts().await.expect("listed");
    let names: Vec<&str> = prompts.iter().map(|prompt| prompt.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "diagnose_equipment",
            "shift_handover",
            "explain_alarm",
            "tank_check"
        ],
        "the built-in prompts, then the demo plant's own"
    );
    assert!(
        prompts
            .iter()
            .all(|prompt| prompt.title.is_some() && prompt.description.is_some())
    );

    let got = client
        .get_prompt(
            GetPromptRequestParams::new("diagnose_equipment")
                .with_arguments(arguments(json!({"equipment": "Pump1"}))),
        )
        .await
        .expect("rendered");
    let text = serde_json::to_value(&got.messages).expect("JSON")[0]["content"]["text"]
        .as_str()
        .expect("a text message")
        .to_owned();
    assert!(
        text.starts_with("What is wrong with Pump1?") && text.contains("runtime_describe_object"),
        "{text}"
    );
    let handover = client
        .get_prompt(GetPromptRequestParams::new("shift_handover"))
        .await
        .expect("rendered with its default");
    assert!(
        serde_json::to_string(&handover.messages)
            .expect("JSON")
            .contains("the last 8 hours")
    );
    for (name, given, wanted) in [
        (
            "diagnose_equipment",
            json!({}),
            "needs its argument \"equipment\"",
        ),
        (
            "diagnose_equipment",
            json!({"equipment": "Pump99"}),
            "\"Pump99\" is not in the plant",
        ),
        (
            "explain_alarm",
            json!({"alarm": "Nope.Hi"}),
            "\"Nope.Hi\" is not in the plant",
        ),
        ("launch_rocket", json!({}), "no prompt named \"launch_rocket\""),
    ] {
        let refused = client
            .get_prompt(GetPromptRequestParams::new(name).with_arguments(arguments(given)))
            .await
            .expect_err("refused");
        assert!(refused.to_string().contains(wanted), "{name}: {refused}");
    }

    let completed = |reference: Reference, argument: &str, typed: &str| {
        let request = CompleteRequestParams::new(reference, ArgumentInfo::new(argument, typed));
        let client = &client;
        async move {
            client
                .complete(request)
                .await
                .expect("completed")
                .completion
                .values
        }
    };
    let pumps = completed(Reference::for_prompt("diagnose_equipment"), "equipment", "pu").await;
    assert!(
        !pumps.is_empty() && pumps.iter().all(|name| name.starts_with("Pump")),
        "{pumps:?}"
    );
    let alarms = completed(Reference::for_prompt("explain_alarm"), "alarm", "Tank1.").await;
    assert!(alarms.contains(&"Tank1.Level.Hi".to_owned()), "{alarms:?}");
    let folders = completed(
        Reference::for_resource("tserver://plant/model/{+folder}"),
        "folder",
        "",
    )
    .await;
    assert!(!folders.is_empty(), "every folder");
    assert!(
        completed(Reference::for_prompt("explain_alarm"), "alarm", "zzz")
            .await
            .is_empty()
    );
    client.cancel().await.expect("closes");
    rig.stop().await;
}

/// A plant whose file gives two prompts: one in place of a built-in, one of its own.
const PLANT_WITH_PROMPTS: &str = r#"
[[types]]
name = "Pump"

  [[types.tags]]
  name = "MotorCurrent"
  type = "number"

[[equipment]]
name = "Pump1"
type = "Pump"
path = "Plant/Area1/Pump1"

[[equipment]]
name = "Pump2"
type = "Pump"
path = "Plant/Area1/Pump2"

[[prompts]]
name = "diagnose_equipment"
title = "Diagnose, as this site does"
template = "Site diagnosis of {equipment}."

  [[prompts.arguments]]
  name = "equipment"
  values = "equipment"

[[prompts]]
name = "pump_check"
description = "A pump over some hours."
template = "Check {pump} over {hours} hours; {{not an argument}}."

  [[prompts.arguments]]
  name = "pump"
  description = "The pump."
  values = "equipment"

  [[prompts.arguments]]
  name = "hours"
  default = "4"
"#;

#[tokio::test]
async fn the_site_prompts_of_an_import_are_offered_after_the_built_in_ones_and_replace_theirs() {
    let rig = rig().await;
    let client = rig.client().await;
    let names = || async {
        let prompts = client.list_all_prompts().await.expect("listed");
        prompts
            .into_iter()
            .map(|prompt| prompt.name)
            .collect::<Vec<String>>()
    };
    assert_eq!(
        names().await,
        [
            "diagnose_equipment",
            "shift_handover",
            "explain_alarm",
            "tank_check"
        ]
    );

    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("plant.toml");
    std::fs::write(&file, PLANT_WITH_PROMPTS).expect("writes");
    let imported = admin(
        &["plant", &rig.path(), "import", file.to_str().expect("utf-8")],
        "",
    );
    assert!(
        imported.contains("prompts: 2 added, 0 changed, 1 removed") && imported.contains("- tank_check"),
        "{imported}"
    );
    // What the running server's background does at its next tick.
    assert!(
        rig.server.runtime.reload_plant_if_imported().await,
        "the import is seen"
    );
    assert_eq!(
        names().await,
        [
            "shift_handover",
            "explain_alarm",
            "diagnose_equipment",
            "pump_check"
        ]
    );
    let listed = client.list_all_prompts().await.expect("listed");
    let check = listed
        .iter()
        .find(|prompt| prompt.name == "pump_check")
        .expect("listed");
    let required: Vec<(String, Option<bool>)> = check
        .arguments
        .iter()
        .flatten()
        .map(|argument| (argument.name.clone(), argument.required))
        .collect();
    assert_eq!(
        required,
        [("pump".to_owned(), Some(true)), ("hours".to_owned(), Some(false))]
    );
    assert_eq!(check.description.as_deref(), Some("A pump over some hours."));

    let text = |name: &'static str, given: Value| {
        let client = &client;
        async move {
            client
                .get_prompt(GetPromptRequestParams::new(name).with_arguments(arguments(given)))
                .await
                .map(|got| {
                    serde_json::to_value(&got.messages).expect("JSON")[0]["content"]["text"]
                        .as_str()
                        .expect("a text message")
                        .to_owned()
                })
        }
    };
    assert_eq!(
        text("pump_check", json!({"pump": "Pump2"}))
            .await
            .expect("rendered"),
        "Check Pump2 over 4 hours; {not an argument}."
    );
    // A value is put in as it is, never read as a placeholder itself.
    assert_eq!(
        text("pump_check", json!({"pump": "Pump1", "hours": "{pump}"}))
            .await
            .expect("rendered"),
        "Check Pump1 over {pump} hours; {not an argument}."
    );
    assert_eq!(
        text("diagnose_equipment", json!({"equipment": "Pump1"}))
            .await
            .expect("the site's own"),
        "Site diagnosis of Pump1."
    );
    let refused = text("pump_check", json!({"pump": "Tank1"}))
        .await
        .expect_err("not in the plant");
    assert!(
        refused.to_string().contains("pump \"Tank1\" is not in the plant"),
        "{refused}"
    );
    let refused = text("pump_check", json!({"pump": "Pump1", "hours": "9".repeat(1001)}))
        .await
        .expect_err("too long");
    assert!(
        refused
            .to_string()
            .contains("hours is 1001 characters long; at most 1000"),
        "{refused}"
    );

    let pumps = client
        .complete(CompleteRequestParams::new(
            Reference::for_prompt("pump_check"),
            ArgumentInfo::new("pump", "p"),
        ))
        .await
        .expect("completed")
        .completion
        .values;
    assert_eq!(pumps, ["Pump1", "Pump2"]);
    let free = client
        .complete(CompleteRequestParams::new(
            Reference::for_prompt("pump_check"),
            ArgumentInfo::new("hours", ""),
        ))
        .await
        .expect("completed")
        .completion
        .values;
    assert!(
        free.is_empty(),
        "a text argument has nothing to complete: {free:?}"
    );
    client.cancel().await.expect("closes");
    rig.stop().await;
}
