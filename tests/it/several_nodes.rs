//! Several tserver nodes serving one solution in PostgreSQL: what one node or an admin command
//! changes is what every node uses at its next call (settings, users, secrets), operators'
//! writes land in one audit trail, and a database restart is an error envelope naming the
//! store, then nothing more.

use std::path::Path;
use std::time::{Duration, Instant};

use scripted_llm::{Reply, ScriptedLlm};
use service_client::{Client, ClientOptions, Status, TagWrite, WriteValue};
use tserver::ServerConfig;

use crate::operator_writes::solution_with_writable_tags;
use crate::postgres_store::{TestDatabase, private_server_with_a_database, resumed, stopped};
use crate::support::{ServerProcess, Solution, TestServer, admin};

/// A logged-in client of the node at `addr`.
async fn logged_in(addr: std::net::SocketAddr, user: &str) -> Client {
    let client = Client::connect(addr, ClientOptions::default())
        .await
        .expect("connects");
    client.login(user, "").await.expect("logs in");
    client
}

/// The solution file's secrets key, as the nodes of the database it is copied to are given it.
fn secrets_key(solution: &Solution) -> String {
    std::fs::read_to_string(tserver::solution::key_file(&solution.path))
        .expect("the key file")
        .trim()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_on_one_database_see_every_change_at_their_next_call() {
    let database = TestDatabase::create().await;
    let url = database.url();
    let llm = ScriptedLlm::start(vec![Reply::text("Pump 1 runs normally.")])
        .await
        .expect("llm");
    let solution = solution_with_writable_tags();
    let path = solution.path.to_str().expect("utf-8");
    admin(&["settings", path, "set", "URL", &llm.url()], "");
    admin(
        &[
            "settings",
            path,
            "set",
            "Authorization",
            "BearerToken\n/secret:LlmKey",
        ],
        "",
    );
    admin(&["secrets", path, "set", "LlmKey"], "sk-shared-7781\n");
    admin(&["settings", path, "set", "ModelEnabled", "on"], "");
    admin(&["solution", "copy", path, &url], "");
    let key = secrets_key(&solution);
    let env = [("TSERVER_SECRETS_KEY", key.as_str())];
    let one = ServerProcess::start(Path::new(&url), &[], &env);
    let two = ServerProcess::start(Path::new(&url), &[], &env);

    // A chat on node one: settings and the secret come from the database.
    let on_one = logged_in(one.addr, "guest").await;
    let answer = on_one.chat_envelope("How is Pump 1?").await.expect("a reply");
    assert_eq!(answer.status, Status::Ok, "{answer:?}");
    assert_eq!(answer.text, "Pump 1 runs normally.");
    let requests = llm.requests();
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-shared-7781"),
        "the secret read from the database, opened with the nodes' key"
    );

    // A write on node two, audited in the one trail.
    let on_two = logged_in(two.addr, "guest").await;
    let results = on_two
        .write_tags(vec![TagWrite {
            name: "Tank1.Level".to_owned(),
            value: Some(WriteValue::Number(50.0)),
        }])
        .await
        .expect("answered");
    assert_eq!(results[0].error, "", "{results:?}");
    let audit = admin(&["audit", &url], "");
    assert!(audit.contains("write Tank1.Level by guest"), "{audit}");
    assert!(audit.trim_end().ends_with(" -> 50.0: ok"), "{audit}");

    // An admin change is what both nodes use at their very next call.
    admin(&["settings", &url, "set", "ModelEnabled", "off"], "");
    for client in [&on_one, &on_two] {
        let refused = client.chat_envelope("And now?").await.expect("a reply");
        assert_eq!(refused.status, Status::Disabled, "{refused:?}");
    }
    assert_eq!(llm.requests().len(), 1, "no node asked the model again");

    // A user added on the database logs in on either node at once; removed, on neither.
    admin(
        &[
            "users",
            &url,
            "add",
            "shift2",
            "--no-password",
            "--role",
            "viewer",
        ],
        "",
    );
    logged_in(two.addr, "shift2").await;
    admin(&["users", &url, "remove", "shift2"], "");
    let refused = Client::connect(one.addr, ClientOptions::default())
        .await
        .expect("connects")
        .login("shift2", "")
        .await;
    assert!(refused.is_err(), "{refused:?}");
    drop((one, two));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_the_database_restarts_a_chat_is_an_error_envelope_naming_the_store_in_bounded_time() {
    let (postgres, url) = private_server_with_a_database().await;
    // The model stays off: the gate's answer proves the settings were read, without a model.
    let solution = Solution::demo();
    admin(
        &[
            "solution",
            "copy",
            solution.path.to_str().expect("utf-8"),
            &url.to_string(),
        ],
        "",
    );
    let node = TestServer::start_at(&url.to_string(), ServerConfig::default()).await;
    let client = node.guest().await;
    let before = client.chat_envelope("hello").await.expect("a reply");
    assert_eq!(before.status, Status::Disabled, "{before:?}");

    let postgres = stopped(postgres).await;
    let started = Instant::now();
    let down = client
        .chat_envelope("hello")
        .await
        .expect("a reply, not a dropped call");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the pool's 2 s acquire timeout bounds it: {:?}",
        started.elapsed()
    );
    assert_eq!(down.status, Status::Error, "{down:?}");
    let said = down.warnings.join(" ");
    assert!(
        said.contains("could not read SolutionSettings: solution store (PostgreSQL at postgres://"),
        "{said}"
    );

    let postgres = resumed(postgres).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let after = client.chat_envelope("hello").await.expect("a reply");
        if after.status == Status::Disabled {
            break;
        }
        assert!(Instant::now() < deadline, "the node did not recover: {after:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    node.stop().await;
    tokio::task::spawn_blocking(move || drop(postgres))
        .await
        .expect("stopped");
}
