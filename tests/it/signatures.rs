//! Electronic signatures over the wire: a tag marked `signed` is written only with its
//! writer's password entered again and a stated meaning, one marked `witness` only with a
//! second, different operator's as well, and with `SignedApprovals` on an approval takes the
//! approver's; an alarm marked `signed` is acknowledged only with its acknowledger's (directly
//! or by approving a proposal to); a wrong password is refused and audited, and a signed act's
//! audit row carries who signed, meaning what, over the hash of what was signed.

use serde_json::json;
use service_client::{
    Client, ClientError, Decision, ErrorCode, Signature, SignatureMeaning, TagWrite, WriteValue,
};

use crate::support::{Solution, TestServer, admin};

const PLANT: &str = r#"
[[tags]]
name = "Dose.Setpoint"
path = "Plant/Dose/Setpoint"
type = "number"
initial = 1.0
writable = true
proposable = true
signed = true

[[tags]]
name = "Dose.Limit"
path = "Plant/Dose/Limit"
type = "number"
initial = 5.0
writable = true
signed = true
witness = true

[[tags]]
name = "Dose.Note"
path = "Plant/Dose/Note"
type = "string"
initial = ""
writable = true
proposable = true

[[tags]]
name = "Dose.Pressure"
path = "Plant/Dose/Pressure"
type = "number"
initial = 1.0
writable = true

[[alarms]]
name = "Dose.Pressure.Hi"
tag = "Dose.Pressure"
condition = "Hi"
limit = 8.0
priority = 800
signed = true
"#;

/// A solution with the dosing plant and three users: two operators and a viewer.
fn dosing() -> Solution {
    let solution = Solution::empty();
    let path = solution.path.to_str().expect("utf-8");
    let file = solution.path.with_file_name("dose.toml");
    std::fs::write(&file, PLANT).expect("writes the plant");
    admin(&["plant", path, "import", file.to_str().expect("utf-8")], "");
    for (user, role) in [("ops", "operator"), ("lead", "operator"), ("watcher", "viewer")] {
        admin(&["users", path, "add", user], &format!("{user}-pw\n"));
        admin(&["users", path, "role", user, role], "");
    }
    solution
}

fn sign(user: &str, password: &str, meaning: SignatureMeaning) -> Signature {
    Signature {
        user: user.to_owned(),
        password: password.to_owned(),
        meaning: meaning.into(),
    }
}

fn number(tag: &str, value: f64) -> Vec<TagWrite> {
    vec![TagWrite {
        name: tag.to_owned(),
        value: Some(WriteValue::Number(value)),
    }]
}

async fn logged_in(server: &TestServer, user: &str) -> Client {
    let client = server.client().await;
    client.login(user, &format!("{user}-pw")).await.expect("logs in");
    client
}

/// The server's refusal: its code and message.
fn refusal(outcome: Result<impl std::fmt::Debug, ClientError>) -> (ErrorCode, String) {
    match outcome {
        Err(ClientError::Server { code, message }) => (code, message),
        other => panic!("not refused: {other:?}"),
    }
}

/// The id of what a script proposed through the proposal tool `tool`.
async fn proposed(runtime: &plant::Runtime, tool: &str, arguments: serde_json::Value) -> String {
    let tool = runtime.tools().get(tool).expect("the proposal tool");
    let caller = localai::tools::ToolCaller::Script { script: "Lab".into() };
    let output = tool
        .call(arguments, caller, localai::tools::TOOL_TIMEOUT)
        .await
        .expect("proposes");
    output.proposal.expect("a proposal").to_string()
}

/// Proposal `id` approved by ops, signed.
async fn approved_by_ops(ops: &Client, id: &str) -> service_client::DecideProposalReply {
    ops.decide_proposal_signed(
        id,
        Decision::Approve,
        "",
        vec![sign("ops", "ops-pw", SignatureMeaning::Approved)],
    )
    .await
    .expect("approved")
}

fn audit(path: &str) -> String {
    admin(&["audit", path], "")
}

#[tokio::test]
async fn a_signed_tag_is_written_only_with_its_writers_password_and_meaning() {
    let solution = dosing();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let server = TestServer::start(&solution.path, tserver::ServerConfig::default()).await;
    let ops = logged_in(&server, "ops").await;

    let (code, message) = refusal(ops.write_tags(number("Dose.Setpoint", 2.0)).await);
    assert_eq!(code, ErrorCode::SignatureRequired, "{message}");
    assert!(
        message.contains("writing Dose.Setpoint takes your electronic signature: yours is missing"),
        "{message}"
    );
    assert_eq!(audit(&path), "", "nothing was asked of the plant yet");

    let wrong = vec![sign("ops", "guess", SignatureMeaning::Performed)];
    let (code, message) = refusal(ops.write_tags_signed(number("Dose.Setpoint", 2.0), wrong).await);
    assert_eq!(code, ErrorCode::SignatureRefused, "{message}");
    assert!(
        message.contains("the signature of ops is refused: unknown user or wrong password"),
        "{message}"
    );
    assert!(!message.contains("guess"), "never the password: {message}");
    let trail = audit(&path);
    assert_eq!(trail.lines().count(), 1, "{trail}");
    assert!(
        trail.contains("write Dose.Setpoint by ops")
            && trail.contains("refused: the signature of ops is refused"),
        "the refused signature is audited: {trail}"
    );
    assert!(!trail.contains("guess"), "{trail}");

    let someone_else = vec![sign("lead", "lead-pw", SignatureMeaning::Performed)];
    let (code, message) = refusal(
        ops.write_tags_signed(number("Dose.Setpoint", 2.0), someone_else)
            .await,
    );
    assert_eq!(
        (code, message.contains("yours is missing")),
        (ErrorCode::SignatureRequired, true),
        "{message}"
    );

    let right = vec![sign("ops", "ops-pw", SignatureMeaning::Performed)];
    let results = ops
        .write_tags_signed(number("Dose.Setpoint", 2.0), right)
        .await
        .expect("written");
    assert_eq!(results[0].error, "");
    let value = server
        .runtime
        .objects()
        .tag("Dose.Setpoint")
        .expect("tag")
        .current()
        .value
        .clone();
    assert_eq!(value, plant_model::TagValue::Number(2.0));
    let rows = server.runtime.store().audit(None, 100).await.expect("reads");
    let signed = rows.last().expect("a row");
    let signatures = signed
        .signatures
        .as_deref()
        .expect("the row carries its signature");
    assert!(signatures.starts_with("ops (performed, "), "{signatures}");
    assert!(signatures.contains(" over sha256:"), "{signatures}");
    assert_eq!(rows[0].signatures, None, "a refused signature signs nothing");
    // An unsigned tag takes none, and refuses one sent anyway.
    let note = vec![TagWrite {
        name: "Dose.Note".to_owned(),
        value: Some(WriteValue::Text("checked".into())),
    }];
    assert_eq!(ops.write_tags(note.clone()).await.expect("written")[0].error, "");
    let (code, _) = refusal(
        ops.write_tags_signed(note, vec![sign("ops", "ops-pw", SignatureMeaning::Performed)])
            .await,
    );
    assert_eq!(code, ErrorCode::InvalidArgument);
    server.stop().await;
    assert!(
        admin(&["audit", &path, "verify"], "").starts_with("the audit trail verifies: 3 rows"),
        "the signed row is in the chain"
    );
}

#[tokio::test]
async fn a_witnessed_tag_takes_a_second_different_operator() {
    let solution = dosing();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let server = TestServer::start(&solution.path, tserver::ServerConfig::default()).await;
    let ops = logged_in(&server, "ops").await;
    let own = sign("ops", "ops-pw", SignatureMeaning::Performed);

    let (code, message) = refusal(
        ops.write_tags_signed(number("Dose.Limit", 6.0), vec![own.clone()])
            .await,
    );
    assert_eq!(code, ErrorCode::SignatureRequired);
    assert!(
        message.contains("a witness's (another operator's)") && message.contains("the witness's is missing"),
        "{message}"
    );
    let twice = vec![own.clone(), sign("OPS", "ops-pw", SignatureMeaning::Reviewed)];
    let (code, message) = refusal(ops.write_tags_signed(number("Dose.Limit", 6.0), twice).await);
    assert_eq!(
        code,
        ErrorCode::SignatureRequired,
        "the writer cannot witness their own write: {message}"
    );
    let viewer = vec![
        own.clone(),
        sign("watcher", "watcher-pw", SignatureMeaning::Reviewed),
    ];
    let (code, message) = refusal(ops.write_tags_signed(number("Dose.Limit", 6.0), viewer).await);
    assert_eq!(code, ErrorCode::SignatureRefused);
    assert!(
        message.contains("the signature of watcher is refused: a viewer may not sign"),
        "{message}"
    );
    let wrong_witness = vec![own.clone(), sign("lead", "ops-pw", SignatureMeaning::Reviewed)];
    let (code, _) = refusal(
        ops.write_tags_signed(number("Dose.Limit", 6.0), wrong_witness)
            .await,
    );
    assert_eq!(code, ErrorCode::SignatureRefused);

    let witnessed = vec![own, sign("lead", "lead-pw", SignatureMeaning::Reviewed)];
    assert_eq!(
        ops.write_tags_signed(number("Dose.Limit", 6.0), witnessed)
            .await
            .expect("written")[0]
            .error,
        ""
    );
    let rows = server.runtime.store().audit(None, 100).await.expect("reads");
    assert_eq!(rows.len(), 3, "two refused signatures and the write: {rows:?}");
    let signatures = rows[2].signatures.as_deref().expect("signed");
    assert!(
        signatures.starts_with("ops (performed, ") && signatures.contains("), lead (reviewed, "),
        "{signatures}"
    );
    server.stop().await;
    admin(&["audit", &path, "verify"], "");
}

#[tokio::test]
async fn with_signed_approvals_an_approval_takes_the_approvers_signature() {
    let solution = dosing();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    admin(&["settings", &path, "set", "SignedApprovals", "on"], "");
    let server = TestServer::start(&solution.path, tserver::ServerConfig::default()).await;
    let ops = logged_in(&server, "ops").await;
    let propose = |tag: &str, value: serde_json::Value| {
        let arguments = json!({"tag": tag, "value": value, "reason": "the lab asked"});
        proposed(&server.runtime, "runtime_propose_write", arguments)
    };
    let id = propose("Dose.Note", json!("recalibrate")).await;
    let (code, message) = refusal(ops.decide_proposal(&id, Decision::Approve, "").await);
    assert_eq!(code, ErrorCode::SignatureRequired);
    assert!(
        message.contains(&format!("approving {id} takes your electronic signature")),
        "{message}"
    );
    let decided = approved_by_ops(&ops, &id).await;
    assert_eq!(decided.write_outcome(), service_client::WriteOutcome::Written);
    let rows = server.runtime.store().audit(None, 100).await.expect("reads");
    let row = rows.last().expect("a row");
    assert!(row.outcome.starts_with(&format!("approved {id}")), "{row:?}");
    assert!(
        row.signatures
            .as_deref()
            .is_some_and(|signed| signed.starts_with("ops (approved, ")),
        "{row:?}"
    );
    // Declining signs nothing.
    let declined = propose("Dose.Note", json!("skip")).await;
    ops.decide_proposal(&declined, Decision::Decline, "not now")
        .await
        .expect("declined");
    server.stop().await;
    admin(&["audit", &path, "verify"], "");
}

/// The pressure alarm tripped by an operator's write (the tag itself is unsigned).
async fn trip_pressure(ops: &Client) {
    let results = ops
        .write_tags(number("Dose.Pressure", 9.0))
        .await
        .expect("written");
    assert_eq!(results[0].error, "");
}

#[tokio::test]
async fn a_signed_alarm_is_acknowledged_only_with_the_acknowledgers_signature() {
    let solution = dosing();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let server = TestServer::start(&solution.path, tserver::ServerConfig::default()).await;
    let ops = logged_in(&server, "ops").await;
    trip_pressure(&ops).await;
    let rows_before = server
        .runtime
        .store()
        .audit(None, 100)
        .await
        .expect("reads")
        .len();

    let (code, message) = refusal(ops.acknowledge_alarm("Dose.Pressure.Hi").await);
    assert_eq!(code, ErrorCode::SignatureRequired, "{message}");
    assert!(
        message.contains("acknowledging Dose.Pressure.Hi takes your electronic signature: yours is missing"),
        "{message}"
    );
    let wrong = vec![sign("ops", "ops-pw?", SignatureMeaning::Performed)];
    let (code, message) = refusal(ops.acknowledge_alarm_signed("Dose.Pressure.Hi", wrong).await);
    assert_eq!(code, ErrorCode::SignatureRefused, "{message}");
    let rows = server.runtime.store().audit(None, 100).await.expect("reads");
    assert_eq!(
        rows.len(),
        rows_before + 1,
        "the refused signature is audited, once"
    );
    let refused = rows.last().expect("a row");
    assert!(
        refused.target == "Dose.Pressure.Hi"
            && refused.outcome.contains("the signature of ops is refused")
            && refused.signatures.is_none(),
        "{refused:?}"
    );
    assert_eq!(
        crate::support::acknowledged_by(&server.runtime, "Dose.Pressure.Hi"),
        None,
        "not acknowledged"
    );
    // A viewer's refusal is about the role, not a signature.
    let watcher = logged_in(&server, "watcher").await;
    let (code, _) = refusal(watcher.acknowledge_alarm("Dose.Pressure.Hi").await);
    assert_eq!(code, ErrorCode::PermissionDenied);

    let right = vec![sign("ops", "ops-pw", SignatureMeaning::Performed)];
    assert!(
        ops.acknowledge_alarm_signed("Dose.Pressure.Hi", right)
            .await
            .expect("acknowledged")
    );
    assert_eq!(
        crate::support::acknowledged_by(&server.runtime, "Dose.Pressure.Hi").as_deref(),
        Some("ops")
    );
    let rows = server.runtime.store().audit(None, 100).await.expect("reads");
    let signed = rows.last().expect("a row");
    assert_eq!(
        (signed.target.as_str(), signed.outcome.as_str()),
        ("Dose.Pressure.Hi", "ok")
    );
    assert!(
        signed
            .signatures
            .as_deref()
            .is_some_and(|signatures| signatures.starts_with("ops (performed, ")
                && signatures.contains(" over sha256:")),
        "{signed:?}"
    );

    // Approving a proposal to acknowledge it takes the approver's signature as well.
    assert!(crate::support::acknowledged_by(&server.runtime, "Dose.Pressure.Hi").is_some());
    ops.write_tags(number("Dose.Pressure", 1.0))
        .await
        .expect("cleared");
    trip_pressure(&ops).await;
    let arguments = json!({"alarm": "Dose.Pressure.Hi", "reason": "seen on the gauge"});
    let id = proposed(&server.runtime, "runtime_propose_alarm_ack", arguments).await;
    let (code, message) = refusal(ops.decide_proposal(&id, Decision::Approve, "").await);
    assert_eq!(code, ErrorCode::SignatureRequired, "{message}");
    let decided = approved_by_ops(&ops, &id).await;
    assert!(
        decided
            .proposal
            .as_ref()
            .is_some_and(|proposal| proposal.outcome == "approved by ops: acknowledged"),
        "{decided:?}"
    );
    server.stop().await;
    assert!(
        admin(&["audit", &path, "verify"], "").starts_with("the audit trail verifies"),
        "signed acknowledgements are in the chain"
    );
}

/// tclient logged in as ops at `addr` (the login's password first on `stdin`), run with `args`.
async fn tclient_as_ops(addr: &str, args: &[&str], stdin: &str) -> anyhow::Result<String> {
    let login = ["--addr", addr, "--user", "ops", "--password-stdin"];
    crate::tclient::tclient(&[&login[..], args].concat(), stdin, false).await
}

#[tokio::test]
async fn tclient_asks_for_the_signatures_a_write_an_approval_or_an_acknowledgement_takes() {
    let solution = dosing();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let server = TestServer::start(&solution.path, tserver::ServerConfig::default()).await;
    let addr = server.addr.to_string();
    // The login's password, then the writer's signature, the witness's name and password.
    let printed = tclient_as_ops(
        &addr,
        &["tags", "write", "Dose.Limit=7"],
        "ops-pw\nops-pw\nlead\nlead-pw\n",
    )
    .await
    .expect("signed and written");
    assert!(
        printed.contains("writing Dose.Limit takes your electronic signature and a witness's")
            && printed.contains("password of ops (signing: performed): ")
            && printed.contains("witness (another operator's user name): ")
            && printed.contains("password of lead (signing: reviewed): ")
            && printed.ends_with("Dose.Limit: written\n"),
        "{printed}"
    );
    assert!(
        !printed.contains("lead-pw"),
        "a password is never echoed: {printed}"
    );
    let refused = tclient_as_ops(&addr, &["tags", "write", "Dose.Setpoint=3"], "ops-pw\nnot-it\n")
        .await
        .expect_err("a wrong password");
    assert!(
        refused
            .to_string()
            .contains("the signature of ops is refused: unknown user or wrong password"),
        "{refused}"
    );

    admin(&["settings", &path, "set", "SignedApprovals", "on"], "");
    let arguments = json!({"tag": "Dose.Note", "value": "flush", "reason": "the lab asked"});
    let id = proposed(&server.runtime, "runtime_propose_write", arguments).await;
    let printed = tclient_as_ops(&addr, &["proposals", "approve", &id], "ops-pw\nops-pw\n")
        .await
        .expect("signed and approved");
    assert!(
        printed.contains("password of ops (signing: approved): ")
            && printed.ends_with("Dose.Note: written\n"),
        "{printed}"
    );

    // A signed alarm's acknowledgement.
    trip_pressure(&logged_in(&server, "ops").await).await;
    let printed = tclient_as_ops(&addr, &["alarms", "ack", "Dose.Pressure.Hi"], "ops-pw\nops-pw\n")
        .await
        .expect("signed and acknowledged");
    assert!(
        printed.contains("acknowledging Dose.Pressure.Hi takes your electronic signature")
            && printed.contains("password of ops (signing: performed): ")
            && printed.ends_with("acknowledged Dose.Pressure.Hi\n"),
        "{printed}"
    );
    server.stop().await;
}
