//! Several tserver nodes serving one solution in PostgreSQL: what one node or an admin command
//! changes is what every node uses at its next call (settings, users, secrets), operators'
//! writes land in one audit trail, and a database restart is an error envelope naming the
//! store, then nothing more. Behind HAProxy, a node killed under load loses no acknowledged
//! write, the scripts it ran move to the other node, and an MCP client whose node died goes on
//! in a new session on the other.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use plant_model::{AlarmEventKind, Quality, TagType, TagValue};
use scripted_llm::{Reply, ScriptedLlm};
use service_client::{Client, ClientOptions, Status, TagWrite, WriteValue};
use store::LoginThrottleConfig;
use tserver::ServerConfig;
use tserver_proto::v1::ErrorCode;
use tserver_tests::haproxy::{Haproxy, Node, free_loopback_addr};

use crate::failover::guest_through;
use crate::operator_writes::solution_with_writable_tags;
use crate::postgres_store::{private_server_with_a_database, resumed, stopped};
use crate::support::{ServerProcess, Solution, TestServer, admin};
use store::test_database::TestDatabase;

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
    std::fs::read_to_string(store::key_file(&solution.path))
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
    // The node may answer from its settings copy until it sees its listener's connection go
    // (no change can commit meanwhile); then every call reads, and fails naming the store.
    let give_up = Instant::now() + Duration::from_secs(10);
    let down = loop {
        let started = Instant::now();
        let answer = client
            .chat_envelope("hello")
            .await
            .expect("a reply, not a dropped call");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the pool's 2 s acquire timeout bounds it: {:?}",
            started.elapsed()
        );
        if answer.status != Status::Disabled || Instant::now() > give_up {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
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

/// A node process serving the database at `url`, with its HTTP listener for HAProxy's checks.
fn node_on(url: &str) -> (ServerProcess, Node) {
    let http = free_loopback_addr();
    // HAProxy (deploy/haproxy.cfg) sends a PROXY header from loopback.
    let process = ServerProcess::start(
        Path::new(url),
        &["--http", &http.to_string(), "--trusted-proxy", "127.0.0.1"],
        &[],
    );
    let node = Node {
        listen: process.addr,
        http,
    };
    (process, node)
}

/// How many of `nodes` have logged that they lead (run the scripts) so far.
fn leaders_logged(nodes: &[&ServerProcess]) -> Vec<bool> {
    nodes
        .iter()
        .map(|node| {
            node.log()
                .lines
                .iter()
                .any(|line| line.contains("this node leads"))
        })
        .collect()
}

/// Waits (at most 5 s) until `wanted` says yes about the nodes' leadership logs.
async fn until_logged(nodes: &[&ServerProcess], wanted: impl Fn(&[bool]) -> bool) -> Vec<bool> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let logged = leaders_logged(nodes);
        if wanted(&logged) || Instant::now() > deadline {
            return logged;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_haproxy_a_killed_node_loses_no_acknowledged_write_and_its_scripts_move_to_the_other() {
    let database = TestDatabase::create().await;
    let url = database.url();
    let solution = solution_with_writable_tags();
    let path = solution.path.to_str().expect("utf-8");
    let tick = solution.path.with_file_name("tick.rhai");
    std::fs::write(&tick, "log(\"tick\");\n").expect("writes the script");
    admin(
        &[
            "scripts",
            path,
            "add",
            "Tick",
            "--file",
            tick.to_str().expect("utf-8"),
            "--trigger",
            "every:200ms",
        ],
        "",
    );
    admin(&["solution", "copy", path, &url], "");
    let (first, first_node) = node_on(&url);
    let (second, second_node) = node_on(&url);
    let haproxy = Haproxy::start([first_node, second_node]);
    haproxy.wait_until_all_up().await;

    // Exactly one node runs the scripts.
    let logged = until_logged(&[&first, &second], |logged| logged.contains(&true)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        leaders_logged(&[&first, &second]),
        logged,
        "leadership held, not passed around"
    );
    assert_eq!(logged.iter().filter(|leads| **leads).count(), 1, "{logged:?}");
    let (leader, follower) = if logged[0] {
        (first, second)
    } else {
        (second, first)
    };

    // Four panels through HAProxy, each writing its own numbers in a loop.
    const PANELS: i64 = 4;
    let running = Arc::new(AtomicBool::new(true));
    let mut panels = Vec::new();
    for panel in 0..PANELS {
        let client = guest_through(&haproxy).await;
        let running = Arc::clone(&running);
        panels.push(tokio::spawn(async move {
            let mut writes: Vec<(Instant, i64, Result<(), String>)> = Vec::new();
            let stop_at = Instant::now() + Duration::from_secs(20);
            let mut count = panel * 1_000_000;
            while running.load(Ordering::Relaxed) && Instant::now() < stop_at {
                count += 1;
                let written = client
                    .write_tags(vec![TagWrite {
                        name: "Pump1.StartCount".to_owned(),
                        value: Some(WriteValue::Integer(count)),
                    }])
                    .await;
                let outcome = match written {
                    Ok(results) if results[0].error.is_empty() => Ok(()),
                    Ok(results) => Err(results[0].error.clone()),
                    Err(error) => Err(error.to_string()),
                };
                writes.push((Instant::now(), count, outcome));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            writes
        }));
    }
    // A panel chatting through HAProxy too: its node reads the settings from the database.
    let chatting = guest_through(&haproxy).await;
    let gate = chatting.chat_envelope("How is Pump 1?").await.expect("a reply");
    assert_eq!(gate.status, Status::Disabled, "{gate:?}");
    tokio::time::sleep(Duration::from_millis(700)).await;
    let killed = Instant::now();
    drop(leader);
    tokio::time::sleep(Duration::from_secs(3)).await;
    running.store(false, Ordering::Relaxed);

    let audit = admin(&["audit", &url], "");
    let audited: std::collections::HashSet<&str> = audit
        .lines()
        .filter(|line| line.contains(" write Pump1.StartCount by guest ") && line.ends_with(": ok"))
        .filter_map(|line| line.rsplit(" -> ").next()?.strip_suffix(": ok"))
        .collect();
    let mut acknowledged = 0;
    for panel in panels {
        let writes = panel.await.expect("the panel did not panic");
        for (_, count, outcome) in &writes {
            if outcome.is_ok() {
                acknowledged += 1;
                assert!(
                    audited.contains(count.to_string().as_str()),
                    "write {count} acknowledged, not audited"
                );
            }
        }
        // A write broken by the kill is not sent again (it may have been carried out): it
        // fails, and the panel's next write goes to the other node within 2 s.
        let failed: Vec<&String> = writes
            .iter()
            .filter_map(|(_, _, outcome)| outcome.as_ref().err())
            .collect();
        assert!(failed.len() <= 1, "{failed:?}");
        let back = writes
            .iter()
            .find(|(at, _, outcome)| *at > killed && outcome.is_ok())
            .map(|(at, _, _)| at.duration_since(killed))
            .expect("a write succeeded after the kill");
        assert!(back < Duration::from_secs(2), "a panel was back after {back:?}");
    }
    assert!(acknowledged > 100, "{acknowledged} writes");

    // The chatting panel chats on whichever node it is on now (a chat broken by the kill is
    // not sent again; the next one is answered).
    let after = match chatting.chat_envelope("And now?").await {
        Ok(reply) => reply,
        Err(_) => chatting
            .chat_envelope("And now?")
            .await
            .expect("a reply after the failover"),
    };
    assert_eq!(after.status, Status::Disabled, "{after:?}");

    // The other node took the scripts over.
    let logged = until_logged(&[&follower], |logged| logged == [true]).await;
    assert_eq!(logged, [true], "the surviving node leads");
    let runs_then = tick_runs(&url);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        tick_runs(&url) > runs_then,
        "Tick goes on running on the new leader"
    );
    drop(follower);
}

/// How many runs of `Tick` the records hold.
fn tick_runs(url: &str) -> u64 {
    let status = admin(&["scripts", url, "status"], "");
    status
        .lines()
        .find(|line| line.starts_with("Tick "))
        .and_then(|line| line.split("runs ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|runs| runs.parse().ok())
        .unwrap_or_else(|| panic!("no run count for Tick in {status}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_logins_on_one_node_lock_the_address_out_on_every_node() {
    let database = TestDatabase::create().await;
    let url = database.url();
    admin(&["init", &url, "--demo"], "");
    let lockout = Duration::from_secs(2);
    let config = || {
        ServerConfig::default().with_login_throttle(LoginThrottleConfig {
            free_failures: 2,
            first_lockout: lockout,
            max_lockout: lockout * 4,
            ..LoginThrottleConfig::default()
        })
    };
    let one = TestServer::start_at(&url, config()).await;
    let two = TestServer::start_at(&url, config()).await;
    for _ in 0..2 {
        let refused = one.client().await.login("guest", "not empty").await;
        assert_eq!(
            refused.expect_err("refused").server_code(),
            Some(ErrorCode::LoginFailed)
        );
    }
    // The other node has seen no failure of its own, yet the address is locked out there.
    let locked = two.client().await.login("guest", "").await;
    assert_eq!(
        locked.expect_err("locked out").server_code(),
        Some(ErrorCode::LoginThrottled)
    );
    tokio::time::sleep(lockout + Duration::from_millis(200)).await;
    two.client()
        .await
        .login("guest", "")
        .await
        .expect("after the lockout");
    // The success cleared the count on every node: two failures are free again on node one.
    let refused = one.client().await.login("guest", "x").await;
    assert_eq!(
        refused.expect_err("refused").server_code(),
        Some(ErrorCode::LoginFailed)
    );
    one.stop().await;
    two.stop().await;
}

/// A demo solution in a database of the test's own, opened by two runtimes (two nodes).
async fn two_runtimes_on_a_demo_database() -> (TestDatabase, tserver::Runtime, tserver::Runtime) {
    let database = TestDatabase::create().await;
    let url = database.url();
    admin(&["init", &url, "--demo"], "");
    let location: store::SolutionLocation = url.parse().expect("a location");
    let one = tserver::Runtime::open_at(&location).await.expect("opens");
    let two = tserver::Runtime::open_at(&location).await.expect("opens");
    (database, one, two)
}

/// Two runtimes on one demo database, their background work running, one of them leading.
struct RunningNodes {
    database: TestDatabase,
    leader: tserver::Runtime,
    follower: tserver::Runtime,
    shutdown: tokio_util::sync::CancellationToken,
    background: Vec<tokio::task::JoinHandle<()>>,
}

/// Two runtimes on one demo database once one leads, and a tick of each background loop after
/// the election, so each historian knows its part.
async fn running_nodes() -> RunningNodes {
    let (database, one, two) = two_runtimes_on_a_demo_database().await;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let mut background = Vec::new();
    for runtime in [&one, &two] {
        let (runtime, shutdown) = (runtime.clone(), shutdown.clone());
        background.push(tokio::spawn(async move {
            runtime.run_background(false, shutdown).await
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(one.leads() || two.leads()) {
        assert!(Instant::now() < deadline, "nobody leads");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (leader, follower) = if one.leads() { (one, two) } else { (two, one) };
    assert!(!follower.leads(), "one leader");
    RunningNodes {
        database,
        leader,
        follower,
        shutdown,
        background,
    }
}

impl RunningNodes {
    /// Stops the background loops, each with its last flush; the database, kept while the
    /// caller holds it.
    async fn stop(self) -> TestDatabase {
        self.shutdown.cancel();
        for task in self.background {
            task.await.expect("the background loop ends with a last flush");
        }
        self.database
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_every_node_sees_alike_is_stored_once_by_the_leader_and_an_acknowledgement_reaches_every_node() {
    let nodes = running_nodes().await;
    let (leader, follower) = (&nodes.leader.clone(), &nodes.follower.clone());
    let write = |runtime: &tserver::Runtime, value: f64| {
        runtime
            .plant()
            .write("Tank1.Level", TagValue::Number(value), Quality::GOOD)
            .expect("written")
    };
    // The demo's seeded history ends when it was made: only what follows is looked at.
    let since = std::time::SystemTime::now();
    write(leader, 42.25);
    let raised = write(follower, 91.5);
    assert_eq!(
        raised.len(),
        1,
        "Tank1.Level.Hi becomes active on the follower: {raised:?}"
    );
    // The leader's own value trips it there too (both read the same broker in a real plant).
    write(leader, 91.75);
    assert!(
        crate::support::acknowledge(follower, "Tank1.Level.Hi", "shift1")
            .await
            .expect("known")
    );
    // Acknowledged on the follower, it is acknowledged on the leader once the follower's
    // historian has stored it (every 5 s) and the leader has looked (every second).
    let acknowledged_on = |runtime| crate::support::acknowledged_by(runtime, "Tank1.Level.Hi");
    let deadline = Instant::now() + Duration::from_secs(10);
    while acknowledged_on(leader).is_none() {
        assert!(
            Instant::now() < deadline,
            "the acknowledgement did not reach the leader"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(acknowledged_on(leader).as_deref(), Some("shift1"));
    let _database = nodes.stop().await;

    let historian = std::sync::Arc::clone(leader.plant().historian());
    let (samples, events) = tokio::task::spawn_blocking(move || {
        let now = std::time::SystemTime::now();
        (
            historian
                .tag_history("Tank1.Level", TagType::Number, since, now, 1000)
                .expect("history reads"),
            historian
                .alarm_history(Some("Tank1.Level"), since, now, 100)
                .expect("alarm history reads"),
        )
    })
    .await
    .expect("read");
    let values: Vec<&TagValue> = samples.samples.iter().map(|sample| &sample.value).collect();
    assert_eq!(
        values,
        [&TagValue::Number(42.25), &TagValue::Number(91.75)],
        "the leader's samples only, each once (the follower's 91.5 is not stored)"
    );
    let mut kinds: Vec<(AlarmEventKind, Option<&str>)> = events
        .events
        .iter()
        .map(|event| (event.kind, event.user.as_deref()))
        .collect();
    kinds.sort_by_key(|(kind, _)| *kind == AlarmEventKind::Active);
    assert_eq!(
        kinds,
        [
            (AlarmEventKind::Acknowledged, Some("shift1")),
            (AlarmEventKind::Active, None)
        ],
        "the leader's activation and the follower's acknowledgement, each once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alarm_shelved_on_one_node_is_shelved_on_every_node_and_the_leader_alone_ends_it() {
    let nodes = running_nodes().await;
    let (leader, follower) = (&nodes.leader.clone(), &nodes.follower.clone());
    let operator = plant::actions::Actor::User {
        name: "shift1".into(),
        role: store::Role::Operator,
        connection: "several-nodes".to_owned(),
        peer: "local".to_owned(),
    };
    let shelve = plant::actions::ShelveAlarm {
        alarm: "Tank1.Level.Hi".to_owned(),
        duration: Duration::from_secs(600),
        reason: "transmitter swap".to_owned(),
        signatures: Vec::new(),
    };
    let until = follower
        .act_now(operator, shelve)
        .await
        .expect("shelved on the follower");
    let shelved_on = |runtime: &tserver::Runtime| {
        runtime
            .objects()
            .alarms()
            .iter()
            .find(|alarm| alarm.definition().name == "Tank1.Level.Hi")
            .expect("the demo's alarm")
            .status()
            .handling
            .shelved
    };
    // Taken up by the leader once the follower's historian stored it and the leader looked.
    let deadline = Instant::now() + Duration::from_secs(10);
    while shelved_on(leader).is_none() {
        assert!(Instant::now() < deadline, "the shelving did not reach the leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let taken_up = shelved_on(leader).expect("shelved");
    assert_eq!(
        (taken_up.by.as_str(), taken_up.reason.as_str()),
        ("shift1", "transmitter swap")
    );
    // Its time up, the follower leaves it to the leader, which ends it once for all; the
    // follower follows the leader's record.
    follower.expire_shelvings(until).await;
    assert!(shelved_on(follower).is_some(), "not the follower's to end");
    leader.expire_shelvings(until).await;
    assert!(shelved_on(leader).is_none());
    let deadline = Instant::now() + Duration::from_secs(10);
    while shelved_on(follower).is_some() {
        assert!(Instant::now() < deadline, "the end did not reach the follower");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _database = nodes.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_nodes_simulator_gives_the_same_values_at_the_same_time() {
    let (_database, one, two) = two_runtimes_on_a_demo_database().await;
    let motions = one.simulator().motions();
    assert!(motions.len() > 3, "the demo simulates several tags");
    for seconds in [0, 1, 7, 61] {
        let at = std::time::SystemTime::now() + Duration::from_secs(seconds);
        one.simulator().step(at);
        two.simulator().step(at);
        for motion in motions.iter() {
            let value = |runtime: &tserver::Runtime| {
                runtime
                    .objects()
                    .tag(&motion.tag)
                    .expect("simulated tag")
                    .current()
                    .value
                    .clone()
            };
            assert_eq!(value(&one), value(&two), "{} at +{seconds} s", motion.tag);
        }
    }
}

/// Two nodes on one database behind HAProxy (the demo plant), and a RuntimeMCP token of
/// `guest`; the database lives as long as the rig.
struct McpNodes {
    _database: TestDatabase,
    nodes: [Option<ServerProcess>; 2],
    haproxy: Haproxy,
    token: String,
}

impl McpNodes {
    async fn start() -> Self {
        let database = TestDatabase::create().await;
        let url = database.url();
        let solution = Solution::demo();
        let path = solution.path.to_str().expect("utf-8");
        let token = admin(
            &["tokens", path, "create", "--user", "guest", "--name", "agent"],
            "",
        )
        .trim()
        .to_owned();
        admin(&["solution", "copy", path, &url], "");
        let (first, first_node) = node_on(&url);
        let (second, second_node) = node_on(&url);
        let haproxy = Haproxy::start([first_node, second_node]);
        haproxy.wait_until_all_up().await;
        Self {
            _database: database,
            nodes: [Some(first), Some(second)],
            haproxy,
            token,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.haproxy.http_front)
    }

    /// Kills the one node that served the HTTP front so far (a session stays on its node);
    /// returns its index.
    async fn kill_the_serving_node(&mut self) -> usize {
        let served = self.haproxy.http_connections().await;
        let serving = served.iter().position(|count| *count > 0).expect("a node served");
        assert_eq!(
            served[1 - serving],
            0,
            "the session stayed on its node: {served:?}"
        );
        drop(self.nodes[serving].take());
        serving
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_session_goes_on_on_the_other_node_when_its_node_dies_behind_haproxy() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let mut rig = McpNodes::start().await;
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(rig.url()).auth_header(rig.token.clone()),
    );
    let client = ().serve(transport).await.expect("initializes through haproxy");
    let read = || {
        client.call_tool(
            CallToolRequestParams::new("runtime_get_value")
                .with_arguments(crate::mcp::arguments(serde_json::json!({"tag": "Tank1.Level"}))),
        )
    };
    assert_eq!(read().await.expect("answered").is_error, Some(false));
    // The demo plant's own prompt, as the database holds the plant.
    let prompts = client.list_all_prompts().await.expect("listed");
    assert!(
        prompts.iter().any(|prompt| prompt.name == "tank_check"),
        "{prompts:?}"
    );
    let killed = rig.kill_the_serving_node().await;

    // The next call reaches the other node, which knows no such session: the client is told
    // so (404) and goes on in a new session there, without the caller doing anything.
    let again = read().await.unwrap_or_else(|error| {
        panic!(
            "not answered on the other node: {error}; haproxy:\n{}",
            rig.haproxy.log()
        )
    });
    assert_eq!(again.is_error, Some(false), "{again:?}");
    let after = rig.haproxy.http_connections().await;
    assert!(after[1 - killed] > 0, "the other node served the rest: {after:?}");
    client.cancel().await.expect("closes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_is_told_to_start_again_when_its_node_dies_behind_haproxy_and_does() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    let mut rig = McpNodes::start().await;
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp_sdk_client.py");
    let mut child = tokio::process::Command::new(crate::mcp_sdk::python())
        .arg(script)
        .args([rig.url().as_str(), rig.token.as_str()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python starts");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(b"{\"failover\": true}\n")
        .await
        .expect("the plan is written");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut next = async || -> serde_json::Value {
        let line = tokio::time::timeout(crate::support::PATIENCE * 2, lines.next_line())
            .await
            .expect("the SDK client answers in time")
            .expect("reads")
            .expect("the SDK client reports before it ends");
        serde_json::from_str(&line).expect("a JSON line")
    };
    assert_eq!(next().await, serde_json::json!({"called": true}));
    rig.kill_the_serving_node().await;
    stdin.write_all(b"go\n").await.expect("the cue is written");
    let report = next().await["report"].clone();
    assert!(child.wait().await.expect("ends").success());

    assert_eq!(report["before"], false, "{report}");
    // The SDK does not start again by itself: it says what the node said.
    assert!(
        report["afterError"]
            .as_str()
            .is_some_and(|error| error.contains("initialize a new session")),
        "{report}"
    );
    assert_eq!(report["again"], false, "a new session is answered: {report}");
}
