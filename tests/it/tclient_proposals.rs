//! `tclient proposals` and the approve-or-decline prompt after a chat turn, against a real
//! server whose scripted model proposes writes to `Pump1.Mode`. Proposals live as long as the
//! connection that made them, so a panel connection stays open while tclient decides.

use plant_model::TagValue as PlantValue;
use scripted_llm::Reply;
use service_client::{ClientOptions, FailoverClient};
use tclient::proposals::{DECLINED_AT_THE_TERMINAL, decide_at_the_terminal, describe};

use crate::proposals::{ProposalRig, calls, propose_mode};
use crate::tclient::{tclient, tclient_process};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proposals_are_listed_and_approved_once_from_the_command_line() {
    let rig = ProposalRig::start(vec![calls(&[propose_mode("Manual")]), Reply::text("Proposed.")]).await;
    let addr = rig.server.addr.to_string();
    let panel = rig.server.guest().await;
    let made = panel
        .chat_reply("Switch pump 1 to manual?")
        .await
        .expect("answered")
        .proposals;
    assert_eq!(made.len(), 1, "{made:?}");
    let id = made[0].id.as_str();

    let listed = tclient(&["--addr", &addr, "proposals", "list"], "", false)
        .await
        .expect("lists");
    assert_eq!(listed, format!("{}\n", describe(&made[0])));
    assert!(
        listed.starts_with(&format!("{id}: write \"Manual\" to Pump1.Mode (was \"Auto\")"))
            && listed.ends_with(" — pending\n"),
        "{listed}"
    );

    // A viewer may not decide: the server's refusal is the command's error, and it stays pending.
    let viewer = [
        "--addr",
        addr.as_str(),
        "--user",
        "watcher",
        "--password-stdin",
        "proposals",
    ];
    let refused = tclient(&[&viewer[..], &["approve", id]].concat(), "pw\n", false)
        .await
        .expect_err("a viewer may not approve");
    assert!(
        refused.to_string().contains("ERROR_CODE_PERMISSION_DENIED"),
        "{refused}"
    );
    assert_eq!(rig.value_of("Pump1.Mode"), PlantValue::Text("Auto".into()));

    let approved = tclient(
        &["--addr", &addr, "proposals", "approve", id, "--comment", "go"],
        "",
        false,
    )
    .await
    .expect("approved");
    let lines: Vec<&str> = approved.lines().collect();
    assert_eq!(lines.len(), 2, "{approved}");
    assert!(
        lines[0].starts_with(&format!("{id}: write \"Manual\" to Pump1.Mode"))
            && lines[0].ends_with(" — approved by guest: written"),
        "{approved}"
    );
    assert_eq!(lines[1], "Pump1.Mode: written");
    assert_eq!(rig.value_of("Pump1.Mode"), PlantValue::Text("Manual".into()));
    let read = tclient(&["--addr", &addr, "tags", "read", "Pump1.Mode"], "", false)
        .await
        .expect("reads");
    assert_eq!(read, "Pump1.Mode = \"Manual\" (Good)\n");
    let listed = tclient(&["--addr", &addr, "proposals", "list"], "", false)
        .await
        .expect("lists");
    assert_eq!(listed, "no proposals wait for a decision\n");

    // Deciding it again, or an id nobody made, fails the program with the server's message.
    let again = tclient_process(&["--addr", &addr, "proposals", "approve", id]).await;
    assert!(!again.status.success(), "decided once: {again:?}");
    assert!(again.stdout.is_empty(), "{again:?}");
    assert_eq!(
        String::from_utf8_lossy(&again.stderr).trim_end(),
        format!(
            "Error: server error ERROR_CODE_INVALID_ARGUMENT: proposal {id} is no longer pending: approved by guest: written"
        )
    );
    let unknown = tclient(
        &["--addr", &addr, "proposals", "decline", "p-000000000000"],
        "",
        false,
    )
    .await
    .expect_err("unknown");
    assert!(
        unknown
            .to_string()
            .contains("no proposal p-000000000000 is known on this server"),
        "{unknown}"
    );
    drop(panel);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proposals_are_declined_from_the_command_line_and_at_the_prompt() {
    let rig = ProposalRig::start(vec![
        calls(&[propose_mode("Off")]),
        Reply::text("Proposed Off."),
        calls(&[propose_mode("Off")]),
        Reply::text("Proposed Off again."),
        calls(&[propose_mode("Manual")]),
        Reply::text("Proposed Manual."),
    ])
    .await;
    let addr = rig.server.addr.to_string();
    let panel = rig.server.guest().await;
    let mut made = Vec::new();
    for question in ["Off?", "Off, surely?", "Manual then?"] {
        let reply = panel.chat_reply(question).await.expect("answered");
        assert_eq!(reply.proposals.len(), 1, "{question}: {reply:?}");
        made.extend(reply.proposals);
    }

    let declined = tclient(
        &[
            "--addr",
            &addr,
            "proposals",
            "decline",
            &made[0].id,
            "--comment",
            "not now",
        ],
        "",
        false,
    )
    .await
    .expect("declined");
    assert!(
        declined.starts_with(&format!("{}: write \"Off\" to Pump1.Mode", made[0].id))
            && declined.ends_with(" — declined by guest: \"not now\"\n"),
        "one line, no write to report: {declined}"
    );
    assert_eq!(rig.value_of("Pump1.Mode"), PlantValue::Text("Auto".into()));

    // The prompt's function on a client of its own, as tclient's chat and repl call it.
    let client = FailoverClient::connect(std::slice::from_ref(&addr), ClientOptions::default())
        .await
        .expect("connects");
    client.login("guest", "").await.expect("logs in");
    let asked = &made[1..];
    let mut printed = Vec::new();
    decide_at_the_terminal(&client, asked, &mut "y\n".as_bytes(), &mut printed, false)
        .await
        .expect("printed");
    let printed = String::from_utf8(printed).expect("utf-8");
    assert_eq!(
        printed,
        format!(
            "  [proposal] {}\n  [proposal] {}\n  decide with `tclient proposals approve ID` (or `decline ID`) \
             from another terminal while this tclient runs: its proposals are withdrawn when it exits\n",
            describe(&asked[0]),
            describe(&asked[1])
        ),
        "nobody asked, nothing read"
    );
    assert_eq!(client.list_proposals().await.expect("lists").proposals.len(), 2);

    // At a terminal: Enter declines the first, `y` approves the second.
    let mut printed = Vec::new();
    decide_at_the_terminal(&client, asked, &mut "\ny\n".as_bytes(), &mut printed, true)
        .await
        .expect("decided");
    let printed = String::from_utf8(printed).expect("utf-8");
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(
        lines[0],
        format!("  [proposal] {}", describe(&asked[0])),
        "{printed}"
    );
    assert!(
        lines[1].starts_with(&format!(
            "approve {} ? [y/N] {}: write \"Off\"",
            asked[0].id, asked[0].id
        )) && lines[1].ends_with(&format!(" — declined by guest: \"{DECLINED_AT_THE_TERMINAL}\"")),
        "{printed}"
    );
    assert_eq!(
        lines[2],
        format!("  [proposal] {}", describe(&asked[1])),
        "{printed}"
    );
    assert!(
        lines[3].starts_with(&format!(
            "approve {} ? [y/N] {}: write \"Manual\"",
            asked[1].id, asked[1].id
        )) && lines[3].ends_with(" — approved by guest: written"),
        "{printed}"
    );
    assert_eq!(lines[4], "Pump1.Mode: written", "{printed}");
    assert_eq!(lines.len(), 5, "{printed}");
    assert_eq!(rig.value_of("Pump1.Mode"), PlantValue::Text("Manual".into()));
    assert!(client.list_proposals().await.expect("lists").proposals.is_empty());

    // A proposal decided meanwhile: the prompt says so and carries on.
    let mut printed = Vec::new();
    decide_at_the_terminal(&client, &asked[..1], &mut "yes\n".as_bytes(), &mut printed, true)
        .await
        .expect("carries on");
    let printed = String::from_utf8(printed).expect("utf-8");
    assert!(
        printed.ends_with(&format!(
            "{}: server error ERROR_CODE_INVALID_ARGUMENT: proposal {} is no longer pending: declined by guest: \"{DECLINED_AT_THE_TERMINAL}\"\n",
            asked[0].id, asked[0].id
        )),
        "{printed}"
    );
    drop(panel);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_and_repl_ask_a_person_and_tell_a_pipe() {
    let rig = ProposalRig::start(vec![
        calls(&[propose_mode("Manual")]),
        Reply::text("Proposed Manual."),
        calls(&[propose_mode("Off")]),
        Reply::text("Proposed Off."),
    ])
    .await;
    let addr = rig.server.addr.to_string();

    // The REPL at a terminal asks after the turn; `y` carries the write out.
    let printed = tclient(
        &["--addr", &addr, "repl"],
        "Switch pump 1 to manual?\ny\n\n",
        true,
    )
    .await
    .expect("the repl runs");
    let asked = printed
        .lines()
        .find(|line| line.starts_with("approve p-"))
        .unwrap_or_else(|| panic!("asked: {printed}"));
    assert!(
        asked.contains(" ? [y/N] p-") && asked.ends_with(" — approved by guest: written"),
        "{printed}"
    );
    assert!(printed.contains("\nPump1.Mode: written\n"), "{printed}");
    assert_eq!(rig.value_of("Pump1.Mode"), PlantValue::Text("Manual".into()));

    // `chat` on a pipe: the envelope alone on standard output, the proposal and how to decide
    // it on standard error; nothing decided, and withdrawn as the program exits.
    let piped = tclient_process(&["--addr", &addr, "chat", "Switch pump 1 off?"]).await;
    assert!(piped.status.success(), "{piped:?}");
    let stdout = String::from_utf8_lossy(&piped.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    service_client::Envelope::from_json(stdout.trim_end()).expect("an envelope");
    let stderr = String::from_utf8_lossy(&piped.stderr);
    assert!(
        stderr.starts_with("  [proposal] p-")
            && stderr.contains(": write \"Off\" to Pump1.Mode (was \"Manual\")")
            && stderr.contains("`tclient proposals approve ID`"),
        "{stderr}"
    );
    assert!(!stderr.contains("[y/N]"), "nobody is asked: {stderr}");
    let guest = rig.server.guest().await;
    let deadline = tokio::time::Instant::now() + crate::support::PATIENCE;
    while !guest.list_proposals().await.expect("lists").proposals.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "withdrawn when tclient's connection closed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(rig.value_of("Pump1.Mode"), PlantValue::Text("Manual".into()));
    rig.stop().await;
}
