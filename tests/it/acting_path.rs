//! The acting path: every act (an operator's write and acknowledgement, a decision on a
//! proposal, a script's write) puts exactly one audit row in the trail before it is carried
//! out, and none is carried out when its row cannot be recorded.

use plant::actions::{
    AcknowledgeAlarm, ActError, Actor, DecideProposal, RequestedWrite, WriteDone, WriteTags,
};
use plant::tag_writes::GivenValue;
use plant_model::{Quality, TagValue};
use serde_json::json;
use store::Role;
use tserver::Runtime;

use crate::support::Solution;

fn operator() -> Actor {
    Actor::User {
        name: "ops".into(),
        role: Role::Operator,
        connection: "acting-path-test".to_owned(),
        peer: "local".to_owned(),
    }
}

fn write_mode(mode: &str) -> WriteTags {
    WriteTags::unsigned(vec![RequestedWrite {
        tag: "Pump1.Mode".to_owned(),
        value: Ok(GivenValue::Text(mode.to_owned())),
    }])
}

async fn audit_rows(runtime: &Runtime) -> Vec<store::AuditEntry> {
    runtime
        .store()
        .audit(None, 10_000)
        .await
        .expect("the audit reads")
}

fn mode(runtime: &Runtime) -> TagValue {
    runtime
        .objects()
        .tag("Pump1.Mode")
        .expect("the demo's tag")
        .current()
        .value
        .clone()
}

fn hi_acknowledged(runtime: &Runtime) -> bool {
    crate::support::acknowledged_by(runtime, "Tank1.Level.Hi").is_some()
}

/// Proposes setting Pump 1's mode as a script would: the proposal's id.
async fn propose_mode(runtime: &Runtime, mode: &str) -> String {
    let tool = runtime
        .tools()
        .get("runtime_propose_write")
        .expect("the proposal tool");
    let caller = localai::tools::ToolCaller::Script {
        script: "ActingPathTest".into(),
    };
    let output = tool
        .call(
            json!({"tag": "Pump1.Mode", "value": mode, "reason": "testing the acting path"}),
            caller,
            localai::tools::TOOL_TIMEOUT,
        )
        .await
        .expect("proposes");
    output.proposal.expect("a proposal was made").to_string()
}

#[tokio::test]
async fn each_act_records_exactly_one_audit_row_and_none_acts_unaudited() {
    let solution = Solution::demo();
    let runtime = Runtime::open(&solution.path).expect("the demo opens");
    runtime
        .plant()
        .write("Tank1.Level", TagValue::Number(91.5), Quality::GOOD)
        .expect("the field reports a high level");
    let before = audit_rows(&runtime).await.len();

    // An operator's write.
    let done = runtime
        .act_now(operator(), write_mode("Manual"))
        .await
        .expect("writes");
    assert_eq!(done, [WriteDone::Written]);
    let rows = audit_rows(&runtime).await;
    assert_eq!(rows.len(), before + 1, "one row for the write");
    let row = rows.last().expect("a row");
    assert_eq!(
        (
            row.user.as_str(),
            row.target.as_str(),
            row.new_value.as_deref(),
            row.outcome.as_str()
        ),
        ("ops", "Pump1.Mode", Some("\"Manual\""), "ok")
    );

    // An acknowledgement.
    let act = AcknowledgeAlarm::unsigned("Tank1.Level.Hi");
    assert_eq!(runtime.act_now(operator(), act).await, Ok(true));
    let rows = audit_rows(&runtime).await;
    assert_eq!(rows.len(), before + 2, "one row for the acknowledgement");
    assert_eq!(
        rows.last().expect("a row").action,
        store::AuditAction::Acknowledge
    );

    // A decision on a proposal: the proposing itself acts on nothing and writes no row.
    let id = propose_mode(&runtime, "Auto").await;
    assert_eq!(
        audit_rows(&runtime).await.len(),
        before + 2,
        "a proposal acts on nothing"
    );
    let act = DecideProposal {
        id: id.clone(),
        approve: true,
        comment: String::new(),
        signatures: Vec::new(),
    };
    let decided = runtime.act_now(operator(), act).await.expect("approves");
    assert_eq!(decided.write, Some(WriteDone::Written));
    assert_eq!(mode(&runtime), TagValue::Text("Auto".into()));
    let rows = audit_rows(&runtime).await;
    assert_eq!(rows.len(), before + 3, "one row for the decision");
    assert!(
        rows.last()
            .expect("a row")
            .outcome
            .starts_with(&format!("approved {id}, proposed by script ActingPathTest")),
        "{:?}",
        rows.last()
    );

    // A script's write.
    let script = Actor::Script {
        name: "Shift".to_owned(),
    };
    let done = runtime.act_now(script, write_mode("Off")).await.expect("writes");
    assert_eq!(done, [WriteDone::Written]);
    let rows = audit_rows(&runtime).await;
    assert_eq!(rows.len(), before + 4, "one row for the script's write");
    assert_eq!(rows.last().expect("a row").user, "script:Shift");

    // Now the audit refuses every row: no act is carried out.
    let database = rusqlite::Connection::open(&solution.path).expect("opens the file");
    database
        .execute_batch(
            "CREATE TRIGGER refuse_audit BEFORE INSERT ON Audit BEGIN SELECT RAISE(ABORT, 'the disk is full'); END;",
        )
        .expect("adds the trigger");
    runtime
        .plant()
        .write("Tank1.Level", TagValue::Number(50.0), Quality::GOOD)
        .expect("back to normal");
    runtime
        .plant()
        .write("Tank1.Level", TagValue::Number(92.0), Quality::GOOD)
        .expect("high again");
    assert!(!hi_acknowledged(&runtime), "tripped again, unacknowledged");
    let pending = propose_mode(&runtime, "Manual").await;
    let unaudited = |refusal: Result<_, ActError>| match refusal {
        Err(ActError::NotAudited { error, .. }) => assert!(error.contains("the disk is full"), "{error}"),
        other => panic!("acted without its audit: {other:?}"),
    };
    unaudited(runtime.act_now(operator(), write_mode("Manual")).await.map(drop));
    unaudited(
        runtime
            .act_now(operator(), AcknowledgeAlarm::unsigned("Tank1.Level.Hi"))
            .await
            .map(drop),
    );
    let approve = DecideProposal {
        id: pending.clone(),
        approve: true,
        comment: String::new(),
        signatures: Vec::new(),
    };
    unaudited(runtime.act_now(operator(), approve).await.map(drop));
    let script = Actor::Script {
        name: "Shift".to_owned(),
    };
    unaudited(runtime.act_now(script, write_mode("Manual")).await.map(drop));
    assert_eq!(
        mode(&runtime),
        TagValue::Text("Off".into()),
        "nothing was written"
    );
    assert!(!hi_acknowledged(&runtime), "nothing was acknowledged");
    let proposal = runtime.proposals().get(&pending).expect("still known");
    assert_eq!(
        proposal.state,
        plant::proposals::ProposalState::Pending,
        "the proposal is pending again"
    );
    database
        .execute_batch("DROP TRIGGER refuse_audit;")
        .expect("drops the trigger");
    assert_eq!(audit_rows(&runtime).await.len(), before + 4, "no row was added");
}
