//! Actions with approval: the scripted model proposes writes and alarm acknowledgements, the
//! proposal is checked at once and waits; an operator approves or declines it (a viewer may
//! not), it is carried out once through the operator's write path and audited as one row, and
//! the next turn is told what became of it. Nothing the model does writes on its own.

use std::time::{Duration, SystemTime};

use plant::proposals::PROPOSAL_LIFETIME;
use plant_model::{Quality, TagValue as PlantValue};
use scripted_llm::{Reply, ScriptedLlm};
use serde_json::{Value, json};
use service_client::{
    ChatEvent, Client, ClientError, Decision, ErrorCode, Proposal, ProposalState, ProposedAction,
    ProposedValue, WriteOutcome,
};
use tserver::ServerConfig;

use crate::chat::tool_message_content;
use crate::support::{Solution, TestServer, admin};

/// The demo plant with `Pump1.Mode` writable and proposable, and `Tank1.Level` writable only,
/// served with the proposal tools on (ModelOptions 0xde) and the model pointed at `llm`.
pub(crate) struct ProposalRig {
    llm: ScriptedLlm,
    solution: Solution,
    pub(crate) server: TestServer,
}

/// The demo solution with `Pump1.Mode` writable and proposable, `Tank1.Level` writable only,
/// the proposal tools on (0xde), and a viewer `watcher` (password `pw`).
pub(crate) fn proposable_solution() -> Solution {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let mut model = solution.plant_model();
    for tag in &mut model.tags {
        match tag.name.as_str() {
            "Pump1.Mode" => (tag.writable, tag.proposable) = (true, true),
            "Tank1.Level" => tag.writable = true,
            _ => {}
        }
    }
    let file = solution.path.with_file_name("proposable.toml");
    std::fs::write(&file, model.to_toml().expect("toml")).expect("writes");
    admin(&["plant", &path, "import", file.to_str().expect("utf-8")], "");
    admin(&["settings", &path, "set", "ModelOptions", "0xde"], "");
    admin(&["users", &path, "add", "watcher"], "pw\n");
    solution
}

impl ProposalRig {
    pub(crate) async fn start(script: Vec<Reply>) -> Self {
        let llm = ScriptedLlm::start(script).await.expect("llm");
        let solution = proposable_solution();
        let path = solution.path.to_str().expect("utf-8").to_owned();
        for (key, value) in [("URL", llm.url().as_str()), ("ModelEnabled", "true")] {
            admin(&["settings", &path, "set", key, value], "");
        }
        let server = TestServer::start(&solution.path, ServerConfig::default()).await;
        Self {
            llm,
            solution,
            server,
        }
    }

    fn path(&self) -> String {
        self.solution.path.to_str().expect("utf-8").to_owned()
    }

    async fn viewer(&self) -> Client {
        let viewer = self.server.client().await;
        viewer.login("watcher", "pw").await.expect("logs in");
        viewer
    }

    fn posts(&self) -> Vec<Value> {
        self.llm
            .requests()
            .iter()
            .map(|request| request.json().expect("a JSON body"))
            .collect()
    }

    pub(crate) fn value_of(&self, tag: &str) -> PlantValue {
        value_of(&self.server.runtime, tag)
    }

    pub(crate) async fn stop(self) {
        self.server.stop().await;
    }
}

pub(crate) fn calls(list: &[(&str, &str, Value)]) -> Reply {
    Reply::ToolCalls(
        list.iter()
            .map(|(id, name, arguments)| ((*id).to_owned(), (*name).to_owned(), arguments.to_string()))
            .collect(),
    )
}

pub(crate) fn propose_mode(mode: &str) -> (&'static str, &'static str, Value) {
    (
        "call_mode",
        "runtime_propose_write",
        json!({"tag": "Pump1.Mode", "value": mode, "reason": "the level is high; run the pump by hand"}),
    )
}

/// The text of the last user message of a POST.
fn last_user_message(post: &Value) -> String {
    post["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .rev()
        .find(|message| message["role"] == "user")
        .and_then(|message| message["content"].as_str())
        .expect("a user message")
        .to_owned()
}

fn written_mode(proposal: &Proposal) -> (&str, Option<&ProposedValue>, Option<&ProposedValue>) {
    match &proposal.action {
        Some(ProposedAction::Write(write)) => (
            write.tag.as_str(),
            write.current.as_ref().and_then(|value| value.kind.as_ref()),
            write.proposed.as_ref().and_then(|value| value.kind.as_ref()),
        ),
        other => panic!("a write, not {other:?}"),
    }
}

fn server_error(error: &ClientError) -> (ErrorCode, &str) {
    match error {
        ClientError::Server { code, message } => (*code, message.as_str()),
        other => panic!("a server error, not {other:?}"),
    }
}

#[tokio::test]
async fn the_model_proposes_an_operator_approves_once_and_the_next_turn_is_told() {
    let rig = ProposalRig::start(vec![
        calls(&[
            (
                "call_level",
                "runtime_propose_write",
                json!({"tag": "Tank1.Level", "value": 50, "reason": "lower it"}),
            ),
            propose_mode("Manual"),
            (
                "call_range",
                "runtime_propose_write",
                json!({"tag": "Pump1.Mode", "value": 7, "reason": "a number"}),
            ),
        ]),
        Reply::text("I proposed switching Pump 1 to Manual; an operator decides."),
        Reply::text("Pump 1 runs in Manual now."),
    ])
    .await;
    let operator = rig.server.guest().await;
    let mut stream = operator
        .chat_stream("Tank 1 is overfilling, what should I do?")
        .await
        .expect("streams");
    let mut made = Vec::new();
    while let Some(event) = stream.next_event().await {
        if let ChatEvent::ProposalMade(proposal) = event {
            made.push(proposal);
        }
    }
    let reply = stream.reply().await.expect("answered");
    assert_eq!(made.len(), 1, "one valid proposal of three: {made:?}");
    assert_eq!(reply.proposals, made, "the reply carries what streamed");
    let proposal = &made[0];
    assert!(
        proposal.id.starts_with("p-") && proposal.id.len() == 14,
        "{}",
        proposal.id
    );
    assert_eq!(
        written_mode(proposal),
        (
            "Pump1.Mode",
            Some(&ProposedValue::Text("Auto".into())),
            Some(&ProposedValue::Text("Manual".into()))
        )
    );
    assert_eq!(proposal.reason, "the level is high; run the pump by hand");
    assert_eq!(proposal.proposer, "the assistant (turn 1, asked by guest)");
    assert_eq!((proposal.turn, proposal.state()), (1, ProposalState::Pending));
    let lifetime = proposal.expires_ms - proposal.made_ms;
    assert_eq!(lifetime, 300_000, "five minutes");

    // The model was told: the invalid ones as tool errors, the valid one as waiting.
    let posts = rig.posts();
    let refused = tool_message_content(&posts[1], "call_level");
    assert_eq!(refused["error"]["type"], "refused", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("not proposable")),
        "{refused}"
    );
    let wrong_type = tool_message_content(&posts[1], "call_range");
    assert!(
        wrong_type["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("a text tag cannot take the integer 7")),
        "{wrong_type}"
    );
    let waiting = tool_message_content(&posts[1], "call_mode");
    assert_eq!(waiting["result"]["status"], "proposed, waiting for the operator");
    assert_eq!(waiting["result"]["proposal"], proposal.id.as_str());
    let system = posts[0]["messages"][0]["content"]
        .as_str()
        .expect("system prompt");
    assert!(system.contains("never that it was done"), "{system}");
    // Proposing wrote nothing.
    assert_eq!(rig.value_of("Pump1.Mode"), PlantValue::Text("Auto".into()));

    // Every logged-in client lists it; a viewer may not decide it, and it stays pending.
    let viewer = rig.viewer().await;
    let listed = viewer.list_proposals().await.expect("lists").proposals;
    assert_eq!(listed, made);
    let refused = viewer
        .decide_proposal(&proposal.id, Decision::Approve, "")
        .await
        .expect_err("a viewer may not approve");
    assert_eq!(server_error(&refused).0, ErrorCode::PermissionDenied, "{refused}");
    assert_eq!(operator.list_proposals().await.expect("lists").proposals.len(), 1);
    assert_eq!(rig.value_of("Pump1.Mode"), PlantValue::Text("Auto".into()));

    // Two operators approve at the same moment: one carries it out, the other is told.
    let other = rig.server.guest().await;
    let (first, second) = tokio::join!(
        operator.decide_proposal(&proposal.id, Decision::Approve, "go"),
        other.decide_proposal(&proposal.id, Decision::Approve, "go"),
    );
    let (approved, refused) = match (first, second) {
        (Ok(approved), Err(refused)) | (Err(refused), Ok(approved)) => (approved, refused),
        other => panic!("exactly one approval carries it out: {other:?}"),
    };
    let (code, message) = server_error(&refused);
    assert_eq!(code, ErrorCode::InvalidArgument);
    assert!(
        message.contains("being decided by someone else") || message.contains("approved by guest: written"),
        "{message}"
    );
    assert_eq!(approved.write_outcome(), WriteOutcome::Written);
    let settled = approved.proposal.expect("the proposal");
    assert_eq!(settled.state(), ProposalState::Approved);
    assert_eq!(settled.outcome, "approved by guest: written");
    assert_eq!(rig.value_of("Pump1.Mode"), PlantValue::Text("Manual".into()));
    assert!(
        operator
            .list_proposals()
            .await
            .expect("lists")
            .proposals
            .is_empty()
    );
    let late = operator
        .decide_proposal(&proposal.id, Decision::Decline, "")
        .await
        .expect_err("decided once");
    assert!(
        server_error(&late)
            .1
            .contains("is no longer pending: approved by guest: written"),
        "{late}"
    );

    // The next turn tells the model, inside the operator's message.
    operator.chat("Did it work?").await.expect("answered");
    let posts = rig.posts();
    let told = last_user_message(posts.last().expect("a post"));
    assert!(
        told.starts_with("[Since your last answer:")
            && told.contains(&format!(
                "your proposal {} to write \"Manual\" to Pump1.Mode",
                proposal.id
            ))
            && told.contains("approved by guest: written")
            && told.ends_with("Did it work?"),
        "{told}"
    );

    // One audit row for the viewer's refusal, one for the approval; none for the late tries.
    let audit = admin(&["audit", &rig.path()], "");
    let lines: Vec<&str> = audit.lines().collect();
    assert_eq!(lines.len(), 2, "{audit}");
    assert!(
        lines[0].contains(" write Pump1.Mode by watcher")
            && lines[0].ends_with(&format!(
                ": permission denied (deciding proposal {})",
                proposal.id
            )),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains(" write Pump1.Mode by guest (127.0.0.1:")
            && lines[1].contains(" \"Auto\" -> \"Manual\": approved ")
            && lines[1].contains(&format!(
                "{}, proposed by the assistant (turn 1, asked by guest): \"the level is high; run the pump by hand\"",
                proposal.id
            )),
        "{}",
        lines[1]
    );
    rig.stop().await;
}

#[tokio::test]
async fn declined_expired_and_withdrawn_proposals_are_never_carried_out() {
    let rig = ProposalRig::start(vec![
        calls(&[propose_mode("Manual")]),
        Reply::text("Proposed."),
        calls(&[propose_mode("Off")]),
        Reply::text("Proposed again."),
        Reply::text("Understood."),
        calls(&[propose_mode("Manual")]),
        Reply::text("Proposed on another panel."),
    ])
    .await;
    let operator = rig.server.guest().await;
    let first = operator
        .chat_reply("Switch pump 1 to manual?")
        .await
        .expect("answered");
    let declined = first.proposals[0].id.clone();
    let outcome = operator
        .decide_proposal(&declined, Decision::Decline, "not while the tank drains")
        .await
        .expect("declined");
    assert_eq!(outcome.write_outcome(), WriteOutcome::Unspecified);
    let settled = outcome.proposal.expect("the proposal");
    assert_eq!(settled.state(), ProposalState::Declined);
    assert_eq!(
        settled.outcome,
        "declined by guest: \"not while the tank drains\""
    );

    let second = operator.chat_reply("And off?").await.expect("answered");
    let expired = second.proposals[0].id.clone();
    rig.server
        .runtime
        .expire_proposals(SystemTime::now() + PROPOSAL_LIFETIME + Duration::from_secs(1));
    let late = operator
        .decide_proposal(&expired, Decision::Approve, "")
        .await
        .expect_err("expired");
    assert!(
        server_error(&late).1.contains("expired without a decision"),
        "{late}"
    );

    // The turn after the decline was told of it, the turn after the expiry of that.
    let told = last_user_message(&rig.posts()[2]);
    assert!(
        told.contains(&format!(
            "your proposal {declined} to write \"Manual\" to Pump1.Mode"
        )) && told.contains("declined by guest: \"not while the tank drains\"")
            && told.ends_with("And off?"),
        "{told}"
    );
    operator.chat("What happened?").await.expect("answered");
    let told = last_user_message(rig.posts().last().expect("a post"));
    assert!(
        told.contains(&format!("your proposal {expired} to write \"Off\" to Pump1.Mode"))
            && told.contains("expired without a decision")
            && !told.contains(&declined),
        "{told}"
    );

    // A proposal never outlives the connection that made it.
    let panel = rig.server.guest().await;
    let third = panel.chat_reply("Manual again?").await.expect("answered");
    assert_eq!(third.proposals.len(), 1);
    assert_eq!(operator.list_proposals().await.expect("lists").proposals.len(), 1);
    drop(panel);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !operator
        .list_proposals()
        .await
        .expect("lists")
        .proposals
        .is_empty()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "withdrawn when its connection closed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let gone = operator
        .decide_proposal(&third.proposals[0].id, Decision::Approve, "")
        .await
        .expect_err("withdrawn");
    assert!(server_error(&gone).1.contains("withdrawn"), "{gone}");

    assert_eq!(rig.value_of("Pump1.Mode"), PlantValue::Text("Auto".into()));
    let audit = admin(&["audit", &rig.path()], "");
    let lines: Vec<&str> = audit.lines().collect();
    assert_eq!(lines.len(), 1, "only the decline is a decision: {audit}");
    assert!(
        lines[0].contains(" write Pump1.Mode by guest")
            && lines[0].contains(&format!(
                "declined {declined}, proposed by the assistant (turn 1, asked by guest)"
            ))
            && lines[0].ends_with(": \"not while the tank drains\""),
        "{}",
        lines[0]
    );
    rig.stop().await;
}

#[tokio::test]
async fn an_alarm_acknowledgement_is_proposed_then_approved() {
    let rig = ProposalRig::start(vec![
        calls(&[
            (
                "call_calm",
                "runtime_propose_alarm_ack",
                json!({"alarm": "Pump1.MotorCurrent.Hi", "reason": "seen"}),
            ),
            (
                "call_unknown",
                "runtime_propose_alarm_ack",
                json!({"alarm": "No.Such.Alarm", "reason": "seen"}),
            ),
            (
                "call_high",
                "runtime_propose_alarm_ack",
                json!({"alarm": "Tank1.Level.Hi", "reason": "the operator knows the tank is high"}),
            ),
        ]),
        Reply::text("I proposed acknowledging Tank1.Level.Hi."),
    ])
    .await;
    // Tank1.Level at 99 trips its Hi alarm (limit 85).
    rig.server
        .runtime
        .plant()
        .write("Tank1.Level", PlantValue::Number(99.0), Quality::GOOD)
        .expect("written");
    let alarm_state = |name: &str| {
        rig.server
            .runtime
            .objects()
            .alarms()
            .iter()
            .find(|alarm| alarm.definition().name == name)
            .expect("a demo alarm")
            .status()
            .state
    };
    assert_eq!(alarm_state("Tank1.Level.Hi"), plant::objects::AlarmState::Active);
    let operator = rig.server.guest().await;
    let reply = operator
        .chat_reply("Anything to acknowledge?")
        .await
        .expect("answered");
    let posts = rig.posts();
    let calm = tool_message_content(&posts[1], "call_calm");
    assert!(
        calm["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("nothing to acknowledge")),
        "{calm}"
    );
    let unknown = tool_message_content(&posts[1], "call_unknown");
    assert_eq!(unknown["error"]["type"], "not_found", "{unknown}");
    assert_eq!(reply.proposals.len(), 1, "{:?}", reply.proposals);
    let proposal = &reply.proposals[0];
    assert_eq!(
        proposal.action,
        Some(ProposedAction::AcknowledgeAlarm("Tank1.Level.Hi".to_owned()))
    );
    assert_eq!(
        alarm_state("Tank1.Level.Hi"),
        plant::objects::AlarmState::Active,
        "not yet"
    );
    // A viewer's refused decision is audited as the acknowledgement it would have decided.
    rig.viewer()
        .await
        .decide_proposal(&proposal.id, Decision::Approve, "")
        .await
        .expect_err("a viewer may not decide");
    let decided = operator
        .decide_proposal(&proposal.id, Decision::Approve, "")
        .await
        .expect("approved");
    assert_eq!(
        decided.proposal.expect("proposal").outcome,
        "approved by guest: acknowledged"
    );
    assert_eq!(
        alarm_state("Tank1.Level.Hi"),
        plant::objects::AlarmState::Acknowledged
    );

    // Acknowledged now: proposing it again (here over the framed CallTool) is refused.
    let again = operator
        .call_tool(
            "runtime_propose_alarm_ack",
            &json!({"alarm": "Tank1.Level.Hi", "reason": "again"}),
        )
        .await
        .expect("answered");
    assert!(
        again.is_error
            && again
                .content_json
                .contains("is acknowledged: there is nothing to acknowledge"),
        "{}",
        again.content_json
    );
    let audit = admin(&["audit", &rig.path()], "");
    let lines: Vec<&str> = audit.lines().collect();
    assert_eq!(lines.len(), 2, "{audit}");
    assert!(
        lines[0].contains(" acknowledge Tank1.Level.Hi by watcher")
            && lines[0].ends_with(&format!("permission denied (deciding proposal {})", proposal.id)),
        "{audit}"
    );
    assert!(
        lines[1].contains(" acknowledge Tank1.Level.Hi by guest")
            && lines[1].contains(&format!(
                "approved {}, proposed by the assistant (turn 1, asked by guest): \"the operator knows the tank is high\"",
                proposal.id
            )),
        "{audit}"
    );
    rig.stop().await;
}

#[tokio::test]
async fn a_shelving_is_proposed_for_a_while_and_approved_within_the_sites_bound() {
    let rig = ProposalRig::start(vec![
        calls(&[
            (
                "call_too_long",
                "runtime_propose_alarm_shelve",
                json!({"alarm": "Tank2.Level.Lo", "minutes": 1_000_000, "reason": "r"}),
            ),
            (
                "call_shelve",
                "runtime_propose_alarm_shelve",
                json!({"alarm": "Tank2.Level.Lo", "minutes": 120,
                       "reason": "the level transmitter is being replaced"}),
            ),
            (
                "call_past_the_site",
                "runtime_propose_alarm_shelve",
                json!({"alarm": "Tank1.Level.Hi", "minutes": 2000, "reason": "all week"}),
            ),
        ]),
        Reply::text("I proposed shelving Tank2.Level.Lo for 2 hours."),
    ])
    .await;
    let operator = rig.server.guest().await;
    let reply = operator
        .chat_reply("Tank 2's transmitter is out: quiet its alarm")
        .await
        .expect("answered");
    let posts = rig.posts();
    let too_long = tool_message_content(&posts[1], "call_too_long");
    assert_eq!(too_long["error"]["type"], "invalid_arguments", "{too_long}");
    assert_eq!(reply.proposals.len(), 2, "{:?}", reply.proposals);
    let shelving = &reply.proposals[0];
    assert_eq!(
        shelving.action,
        Some(ProposedAction::ShelveAlarm(service_client::ProposedShelving {
            alarm: "Tank2.Level.Lo".to_owned(),
            minutes: 120,
        }))
    );
    let label = |alarm: &str| crate::support::alarm_label(&rig.server.runtime, alarm);
    assert_ne!(label("Tank2.Level.Lo"), "shelved", "not before it is approved");
    let decided = operator
        .decide_proposal(&shelving.id, Decision::Approve, "")
        .await
        .expect("approved");
    assert_eq!(
        decided.proposal.expect("proposal").outcome,
        "approved by guest: shelved for 2 h"
    );
    assert_eq!(label("Tank2.Level.Lo"), "shelved");
    let status = rig
        .server
        .runtime
        .objects()
        .alarm("Tank2.Level.Lo")
        .expect("a demo alarm")
        .status();
    let shelved = status.handling.shelved.expect("shelved");
    assert_eq!(
        (shelved.by.as_str(), shelved.reason.as_str()),
        ("guest", "the level transmitter is being replaced")
    );
    assert_eq!(
        shelved.until.duration_since(shelved.since).expect("after"),
        Duration::from_secs(7200)
    );
    // Past the site's ShelvingMaxHours (24 unless set) when decided: audited, not carried out.
    let past = operator
        .decide_proposal(&reply.proposals[1].id, Decision::Approve, "")
        .await
        .expect("decided");
    assert_eq!(
        past.proposal.expect("proposal").outcome,
        "approved by guest: not carried out: a shelving lasts at most 24 h (ShelvingMaxHours)"
    );
    assert_ne!(label("Tank1.Level.Hi"), "shelved");
    let audit = admin(&["audit", &rig.path()], "");
    assert!(
        audit.contains(" shelve Tank2.Level.Lo by guest")
            && audit.contains("for 2 h: the level transmitter is being replaced"),
        "{audit}"
    );
    rig.stop().await;
}

#[tokio::test]
async fn no_tool_name_or_argument_trick_writes() {
    let tricks = [
        (
            "t1",
            "runtime_write_tag",
            json!({"tag": "Pump1.Mode", "value": "Manual"}),
        ),
        (
            "t2",
            "runtime_propose_write",
            json!({"tag": "Pump1.Mode", "value": "Manual", "reason": "x", "approved": true}),
        ),
        (
            "t3",
            "runtime_propose_write",
            json!({"tag": "Plant/Area1/Tank1/Level", "value": 10, "reason": "x"}),
        ),
        (
            "t4",
            "runtime_propose_write",
            json!({"tag": "Pump1.Mode", "value": ["Manual"], "reason": "x"}),
        ),
        (
            "t5",
            "runtime_propose_write",
            json!({"tag": "Pump1.Mode", "value": "Manual"}),
        ),
        (
            "t6",
            "RUNTIME_PROPOSE_WRITE",
            json!({"tag": "Pump1.Mode", "value": "Manual", "reason": "x"}),
        ),
        (
            "t7",
            "runtime_get_value",
            json!({"tag": "Pump1.Mode", "value": "Manual"}),
        ),
        (
            "t8",
            "runtime_propose_write",
            json!({"tag": "Pump1.Mode", "value": "Banana", "reason": "x"}),
        ),
        (
            "t9",
            "runtime_propose_write",
            json!({"tag": "Pump1.Mode", "value": "Auto", "reason": "x"}),
        ),
    ];
    let rig = ProposalRig::start(vec![calls(&tricks), Reply::text("Done.")]).await;
    // Every trick is run, none left out by the turn's cap on tool calls.
    admin(
        &["settings", &rig.path(), "set", "MaxToolDispatchesPerTurn", "10"],
        "",
    );
    let operator = rig.server.guest().await;
    let reply = operator
        .chat_reply("Set pump 1 to manual now.")
        .await
        .expect("answered");
    assert!(reply.proposals.is_empty(), "{:?}", reply.proposals);
    let posts = rig.posts();
    for (id, name, _) in &tricks {
        let content = tool_message_content(&posts[1], id);
        assert_eq!(content["ok"], false, "{name}: {content}");
    }
    // A value outside the tag's set, and the value it holds already, are refused by name.
    assert_eq!(
        tool_message_content(&posts[1], "t8")["error"]["message"],
        "cannot propose writing Pump1.Mode: \"Banana\" is not one of Auto, Manual, Off"
    );
    assert_eq!(
        tool_message_content(&posts[1], "t9")["error"]["message"],
        "Pump1.Mode is \"Auto\" already: a write would change nothing"
    );
    assert_eq!(rig.value_of("Pump1.Mode"), PlantValue::Text("Auto".into()));
    assert!(
        operator
            .list_proposals()
            .await
            .expect("lists")
            .proposals
            .is_empty()
    );

    // Without bit 0x40 the proposal tools are not offered at all.
    admin(&["settings", &rig.path(), "set", "ModelOptions", "0x9e"], "");
    let names: Vec<String> = operator
        .list_tools()
        .await
        .expect("lists")
        .into_iter()
        .map(|tool| tool.name)
        .collect();
    assert!(!names.iter().any(|name| name.contains("propose")), "{names:?}");
    let refused = operator
        .call_tool(
            "runtime_propose_write",
            &json!({"tag": "Pump1.Mode", "value": "Manual", "reason": "x"}),
        )
        .await
        .expect("answered");
    assert!(
        refused.is_error && refused.content_json.contains("unknown_tool"),
        "{}",
        refused.content_json
    );
    assert!(admin(&["audit", &rig.path()], "").trim().is_empty());
    rig.stop().await;
}

#[tokio::test]
async fn an_mcp_client_proposes_and_an_operator_approves_it_on_the_framed_protocol() {
    let rig = crate::mcp::McpRig::serving(
        proposable_solution(),
        tserver::http_surface::HttpConfig::default(),
    )
    .await;
    let mcp = rig.client().await;
    let tools = mcp.list_all_tools().await.expect("listed");
    let propose = tools
        .iter()
        .find(|tool| tool.name == "runtime_propose_write")
        .expect("offered under 0x40");
    assert_eq!(
        propose
            .annotations
            .as_ref()
            .and_then(|hints| hints.read_only_hint),
        Some(false),
        "a proposal changes what waits"
    );
    let result = mcp
        .call_tool(
            rmcp::model::CallToolRequestParams::new("runtime_propose_write").with_arguments(
                crate::mcp::arguments(
                    json!({"tag": "Pump1.Mode", "value": "Manual", "reason": "from outside"}),
                ),
            ),
        )
        .await
        .expect("called");
    let content = crate::mcp::content_of(&result);
    assert_eq!(
        content["result"]["status"], "proposed, waiting for the operator",
        "{content}"
    );
    assert_eq!(content["result"]["followWith"], "runtime_get_proposal");
    let id = content["result"]["proposal"].as_str().expect("its id").to_owned();
    let standing = follow(&mcp, &id).await;
    assert_eq!(standing["state"], "pending", "{standing}");
    assert_eq!(standing["settled"], false);
    assert_eq!(
        standing["action"],
        "write \"Manual\" to Pump1.Mode (it was \"Auto\" when proposed)"
    );
    let operator = rig.server.guest().await;
    let pending = operator.list_proposals().await.expect("lists").proposals;
    assert_eq!(pending.len(), 1);
    assert!(
        pending[0].proposer.starts_with("MCP client ") && pending[0].proposer.ends_with(" (guest)"),
        "{}",
        pending[0].proposer
    );
    assert_eq!(
        value_of(&rig.server.runtime, "Pump1.Mode"),
        PlantValue::Text("Auto".into())
    );
    let approved = operator
        .decide_proposal(&pending[0].id, Decision::Approve, "")
        .await
        .expect("approved");
    assert_eq!(approved.write_outcome(), WriteOutcome::Written);
    // The client follows it to the decision: who approved it, and what carrying it out did.
    let standing = follow(&mcp, &id).await;
    assert_eq!(
        (
            &standing["state"],
            &standing["settled"],
            &standing["decidedBy"],
            &standing["outcome"]
        ),
        (
            &json!("approved"),
            &json!(true),
            &json!("guest"),
            &json!("written")
        ),
        "{standing}"
    );
    // A declined one says by whom and why; an expired one says so; an unknown id is not found.
    let declined = propose_over_mcp(&mcp, "Auto").await;
    operator
        .decide_proposal(&declined, Decision::Decline, "not during the shift change")
        .await
        .expect("declined");
    let standing = follow(&mcp, &declined).await;
    assert_eq!(
        (&standing["state"], &standing["decidedBy"], &standing["comment"]),
        (
            &json!("declined"),
            &json!("guest"),
            &json!("not during the shift change")
        ),
        "{standing}"
    );
    let expired = propose_over_mcp(&mcp, "Auto").await;
    rig.server
        .runtime
        .expire_proposals(SystemTime::now() + PROPOSAL_LIFETIME + Duration::from_secs(1));
    let standing = follow(&mcp, &expired).await;
    assert_eq!(
        (&standing["state"], &standing["settled"]),
        (&json!("expired"), &json!(true))
    );
    let unknown = mcp
        .call_tool(
            rmcp::model::CallToolRequestParams::new("runtime_get_proposal")
                .with_arguments(crate::mcp::arguments(json!({"proposal": "p-000000000000"}))),
        )
        .await
        .expect("answered");
    assert_eq!(unknown.is_error, Some(true));
    assert_eq!(crate::mcp::content_of(&unknown)["error"]["type"], "not_found");
    let path = rig.server.runtime.store().location();
    let audit = admin(&["audit", &path], "");
    assert!(
        audit
            .lines()
            .any(|line| line.contains(" write Pump1.Mode by guest")
                && line.contains(&format!("approved {}, proposed by MCP client ", pending[0].id))),
        "{audit}"
    );
    mcp.cancel().await.expect("closes");
    rig.stop().await;
}

/// Where proposal `id` stands, read over MCP.
async fn follow(mcp: &rmcp::service::RunningService<rmcp::RoleClient, ()>, id: &str) -> Value {
    let result = mcp
        .call_tool(
            rmcp::model::CallToolRequestParams::new("runtime_get_proposal")
                .with_arguments(crate::mcp::arguments(json!({"proposal": id}))),
        )
        .await
        .expect("called");
    assert_eq!(result.is_error, Some(false), "{result:?}");
    crate::mcp::content_of(&result)["result"].clone()
}

/// Proposes writing `mode` to Pump1.Mode over MCP: the proposal's id.
async fn propose_over_mcp(mcp: &rmcp::service::RunningService<rmcp::RoleClient, ()>, mode: &str) -> String {
    let result = mcp
        .call_tool(
            rmcp::model::CallToolRequestParams::new("runtime_propose_write").with_arguments(
                crate::mcp::arguments(json!({"tag": "Pump1.Mode", "value": mode, "reason": "from outside"})),
            ),
        )
        .await
        .expect("called");
    crate::mcp::content_of(&result)["result"]["proposal"]
        .as_str()
        .expect("proposed")
        .to_owned()
}

/// A tag's value now.
fn value_of(runtime: &tserver::Runtime, tag: &str) -> PlantValue {
    runtime
        .objects()
        .tag(tag)
        .expect("known tag")
        .current()
        .value
        .clone()
}

/// Proposes writing `mode` to Pump1.Mode over the framed CallTool, as `client`.
pub(crate) async fn propose_by_call(client: &Client, mode: &str, reason: &str) -> String {
    let reply = client
        .call_tool(
            "runtime_propose_write",
            &json!({"tag": "Pump1.Mode", "value": mode, "reason": reason}),
        )
        .await
        .expect("answered");
    assert!(!reply.is_error, "{}", reply.content_json);
    let content: Value = serde_json::from_str(&reply.content_json).expect("JSON");
    content["result"]["proposal"].as_str().expect("an id").to_owned()
}

#[tokio::test]
async fn a_panel_subscribed_to_proposals_is_told_when_they_change() {
    let rig = ProposalRig::start(Vec::new()).await;
    let panel = rig.server.guest().await;
    let nothing = panel
        .subscribe(service_client::SubscribeRequest::default())
        .await
        .expect_err("nothing to watch");
    assert!(
        server_error(&nothing).1.contains("or ask for proposals"),
        "{nothing}"
    );
    let mut watching = panel
        .subscribe(service_client::SubscribeRequest {
            proposals: true,
            ..service_client::SubscribeRequest::default()
        })
        .await
        .expect("subscribed");
    assert!(watching.initial().readings.is_empty());
    let proposer = rig.server.guest().await;
    let id = propose_by_call(&proposer, "Manual", "made elsewhere").await;
    let update = tokio::time::timeout(Duration::from_secs(10), watching.next_update())
        .await
        .expect("told in time")
        .expect("an update");
    assert!(
        update.proposals_changed && update.readings.is_empty(),
        "{update:?}"
    );
    assert_eq!(panel.list_proposals().await.expect("lists").proposals[0].id, id);
    panel
        .decide_proposal(&id, Decision::Decline, "")
        .await
        .expect("declined");
    let update = tokio::time::timeout(Duration::from_secs(10), watching.next_update())
        .await
        .expect("told in time")
        .expect("an update");
    assert!(update.proposals_changed, "{update:?}");
    assert!(panel.list_proposals().await.expect("lists").proposals.is_empty());
    rig.stop().await;
}

#[tokio::test]
async fn the_pending_list_fits_the_smallest_frame_and_says_how_many_it_left_out() {
    let solution = proposable_solution();
    let server = TestServer::start(&solution.path, ServerConfig::default().with_max_frame(4096)).await;
    let mut proposers = Vec::new();
    for _ in 0..3 {
        let client = server.guest().await;
        for index in 0..10 {
            propose_by_call(&client, "Manual", &format!("{index} {}", "é".repeat(490))).await;
        }
        proposers.push(client);
    }
    let reply = proposers[0].list_proposals().await.expect("lists");
    assert!(
        !reply.proposals.is_empty() && reply.proposals.len() < 30,
        "{}",
        reply.proposals.len()
    );
    assert_eq!(reply.proposals.len() + reply.left_out as usize, 30);
    let refused = proposers[0]
        .call_tool(
            "runtime_propose_write",
            &json!({"tag": "Pump1.Mode", "value": "Manual", "reason": "one more"}),
        )
        .await
        .expect("answered");
    assert!(
        refused.is_error
            && refused
                .content_json
                .contains("10 proposals from here are waiting already"),
        "{}",
        refused.content_json
    );
    server.stop().await;
}

/// A text value that would display as something else (a bidirectional override, a control or
/// an invisible character) is refused as a proposal and as a write, naming the character; the
/// value stays, and nothing waits for approval.
#[tokio::test]
async fn a_text_value_with_hidden_or_reordering_characters_is_never_proposed_or_written() {
    let rig = ProposalRig::start(vec![Reply::text("Done.")]).await;
    let operator = rig.server.guest().await;
    for (value, named) in [
        ("Off\u{202e}", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
        ("\u{2066}Manual\u{2069}", "U+2066 (LEFT-TO-RIGHT ISOLATE)"),
        ("Manual\nOff", "U+000A (a control character)"),
        ("Au\u{200b}to", "U+200B (ZERO WIDTH SPACE)"),
    ] {
        let refused = operator
            .call_tool(
                "runtime_propose_write",
                &json!({"tag": "Pump1.Mode", "value": value, "reason": "x"}),
            )
            .await
            .expect("answered");
        assert!(
            refused.is_error && refused.content_json.contains(named),
            "{value:?}: {}",
            refused.content_json
        );
        let written = operator
            .write_tags(vec![tserver_proto::v1::TagWrite {
                name: "Pump1.Mode".into(),
                value: Some(tserver_proto::v1::tag_write::Value::Text(value.into())),
            }])
            .await
            .expect("answered");
        let outcome = &written[0];
        assert!(outcome.error.contains(named), "{value:?}: {outcome:?}");
    }
    assert_eq!(rig.value_of("Pump1.Mode"), PlantValue::Text("Auto".into()));
    assert!(
        operator
            .list_proposals()
            .await
            .expect("lists")
            .proposals
            .is_empty()
    );
    rig.stop().await;
}
