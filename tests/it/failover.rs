//! Client failover: `FailoverClient` over two nodes (one shut down, one killed mid-call),
//! `tclient --addr a,b`, and two node processes behind a real HAProxy running
//! `deploy/haproxy.cfg`, one killed under load.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use plant_model::{Quality, TagValue};
use service_client::{
    ClientError, ClientOptions, FailoverClient, FailoverSubscription, SubscribeRequest, TagUpdate,
    TagValue as WireValue,
};
use tserver::ServerConfig;
use tserver_tests::haproxy::{Haproxy, Node, free_loopback_addr};

use crate::support::{PATIENCE, ServerProcess, Solution, TestServer, admin};

fn set_number(server: &TestServer, tag: &str, value: f64) {
    server
        .runtime
        .plant()
        .write(tag, TagValue::Number(value), Quality::GOOD)
        .expect("written");
}

async fn next(subscription: &mut FailoverSubscription) -> TagUpdate {
    tokio::time::timeout(PATIENCE, subscription.next_update())
        .await
        .expect("an update within the patience")
        .expect("the client is open")
}

fn number_of(update: &TagUpdate, tag: &str) -> Option<f64> {
    update
        .readings
        .iter()
        .rev()
        .find(|reading| reading.name == tag)
        .and_then(|reading| match reading.value {
            Some(WireValue::Number(number)) => Some(number),
            _ => None,
        })
}

#[tokio::test]
async fn a_failover_client_moves_to_the_next_node_logs_in_again_and_renews_its_subscriptions() {
    let (one, two) = (Solution::demo(), Solution::demo());
    let first = TestServer::start(&one.path, ServerConfig::default()).await;
    let second = TestServer::start(&two.path, ServerConfig::default()).await;
    let addrs = [first.addr.to_string(), second.addr.to_string()];
    let client = FailoverClient::connect(&addrs, ClientOptions::default())
        .await
        .expect("connects");
    client.login("guest", "").await.expect("logs in");
    assert_eq!(client.current_addr(), Some(addrs[0].as_str()));
    let mut subscription = client
        .subscribe(SubscribeRequest {
            names: vec!["Pump1.MotorCurrent".to_owned()],
            ..SubscribeRequest::default()
        })
        .await
        .expect("subscribed");
    set_number(&first, "Pump1.MotorCurrent", 11.5);
    assert_eq!(
        number_of(&next(&mut subscription).await, "Pump1.MotorCurrent"),
        Some(11.5)
    );

    // The second node's plant says something else: what the client reads next proves where.
    set_number(&second, "Pump1.MotorCurrent", 42.5);
    first.stop().await;
    let readings = client
        .read_tags(&["Pump1.MotorCurrent"])
        .await
        .expect("read on the next node");
    assert_eq!(readings[0].value, Some(WireValue::Number(42.5)));
    assert_eq!(client.current_addr(), Some(addrs[1].as_str()));
    assert_eq!(client.failovers(), 1);

    // The renewed subscription starts with the new node's readings, then its changes.
    assert_eq!(
        number_of(&next(&mut subscription).await, "Pump1.MotorCurrent"),
        Some(42.5)
    );
    set_number(&second, "Pump1.MotorCurrent", 43.0);
    assert_eq!(
        number_of(&next(&mut subscription).await, "Pump1.MotorCurrent"),
        Some(43.0)
    );
    assert!(subscription.unsubscribe().await.expect("unsubscribes"));
    second.stop().await;
}

#[tokio::test]
async fn a_call_that_may_change_something_is_not_repeated_when_its_node_dies_under_it() {
    // A model that accepts the POST and never answers: the chat turn is in flight for good.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let silent_url = format!("http://{}/v1", silent.local_addr().expect("an address"));
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let (one, two) = (Solution::demo(), Solution::demo());
    for solution in [&one, &two] {
        let path = solution.path.to_str().expect("utf-8");
        admin(&["settings", path, "set", "URL", &silent_url], "");
        admin(&["settings", path, "set", "ModelEnabled", "true"], "");
    }
    let first = ServerProcess::start(&one.path, &[], &[]);
    let second = ServerProcess::start(&two.path, &[], &[]);
    let client = FailoverClient::connect(
        &[first.addr.to_string(), second.addr.to_string()],
        ClientOptions::default(),
    )
    .await
    .expect("connects");
    client.login("guest", "").await.expect("logs in");
    let turn = tokio::spawn({
        let client = client.clone();
        async move { client.chat("What is wrong with Pump 1?").await }
    });
    // The turn has reached the model once the silent server holds a connection.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed = Instant::now();
    drop(first);
    let lost = tokio::time::timeout(PATIENCE, turn)
        .await
        .expect("the turn ends when its node dies")
        .expect("the task did not panic");
    assert!(
        matches!(lost, Err(ClientError::ConnectionLost { .. })),
        "a chat turn whose node died is reported, not sent again: {lost:?}"
    );
    client.ping().await.expect("the next call goes to the other node");
    assert!(killed.elapsed() < Duration::from_secs(2), "back within 2 s");
    assert_eq!(client.current_addr(), Some(second.addr.to_string().as_str()));
    held.abort();
}

#[tokio::test]
async fn a_refused_login_can_be_retried_and_a_close_the_server_explains_ends_the_client() {
    let solution = Solution::demo();
    let config = ServerConfig::default().with_login_timeout(Duration::from_millis(300));
    let server = TestServer::start(&solution.path, config).await;
    let dead = free_loopback_addr();
    let addrs = [server.addr.to_string(), dead.to_string()];
    let client = FailoverClient::connect(&addrs, ClientOptions::default())
        .await
        .expect("connects");
    // A refused login closes that connection; the client connects again (the dead address
    // first, then round to the live one) and the operator may try again.
    let refused = client.login("guest", "wrong").await;
    assert!(
        matches!(refused, Err(ClientError::LoginRefused { .. })),
        "{refused:?}"
    );
    client.login("guest", "").await.expect("the second try logs in");
    client.ping().await.expect("pongs");
    assert_eq!(client.current_addr(), Some(addrs[0].as_str()));

    // A connection that never logs in is closed by the server saying why: that is no node
    // going away, so the client ends with the server's reason instead of moving.
    let idle = FailoverClient::connect(&addrs, ClientOptions::default())
        .await
        .expect("connects");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let after = idle.ping().await;
    assert!(
        matches!(&after, Err(ClientError::ConnectionLost { reason }) if reason.to_string().contains("UNAUTHENTICATED")),
        "{after:?}"
    );
    server.stop().await;

    // No address answers: one error naming each.
    let nobody = FailoverClient::connect(&[dead.to_string()], ClientOptions::default()).await;
    match nobody {
        Err(ClientError::Unreachable { tried }) => assert!(tried.contains(&dead.to_string()), "{tried}"),
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[tokio::test]
async fn tclient_takes_several_addresses_and_uses_the_first_that_answers() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let dead = free_loopback_addr();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_tclient-under-test"))
        .args(["--addr", &format!("{dead},{}", server.addr), "ping"])
        .output()
        .await
        .expect("tclient runs");
    assert!(output.status.success(), "{output:?}");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        printed.starts_with(&format!("pong from {} in ", server.addr)),
        "{printed}"
    );

    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_tclient-under-test"))
        .args(["--addr", &format!("{},", server.addr), "ping"])
        .output()
        .await
        .expect("tclient runs");
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("address 2 of 2 is empty"), "{said}");
    server.stop().await;
}

/// A panel logged in as the demo's `guest` through HAProxy's front.
pub(crate) async fn guest_through(haproxy: &Haproxy) -> FailoverClient {
    let client = FailoverClient::connect(&[haproxy.front.to_string()], ClientOptions::default())
        .await
        .expect("connects through haproxy");
    client.login("guest", "").await.expect("logs in");
    client
}

/// A node process with its HTTP listener (for HAProxy's health check).
fn node(solution: &Solution) -> (ServerProcess, Node) {
    let http = free_loopback_addr();
    // HAProxy (deploy/haproxy.cfg) sends a PROXY header from loopback.
    let process = ServerProcess::start(
        &solution.path,
        &["--http", &http.to_string(), "--trusted-proxy", "127.0.0.1"],
        &[],
    );
    let node = Node {
        listen: process.addr,
        http,
    };
    (process, node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_haproxy_clients_are_back_on_the_other_node_within_two_seconds_of_a_kill() {
    let (one, two) = (Solution::demo(), Solution::demo());
    let (first, first_node) = node(&one);
    let (second, second_node) = node(&two);
    let haproxy = Haproxy::start([first_node, second_node]);
    haproxy.wait_until_all_up().await;

    // Eight panels through HAProxy (leastconn: four on each node), each reading in a loop.
    const PANELS: usize = 8;
    let running = Arc::new(AtomicBool::new(true));
    let mut panels = Vec::new();
    for _ in 0..PANELS {
        let client = guest_through(&haproxy).await;
        let running = Arc::clone(&running);
        panels.push(tokio::spawn(async move {
            let mut reads: Vec<(Instant, Result<(), String>)> = Vec::new();
            let stop_at = Instant::now() + Duration::from_secs(20);
            while running.load(Ordering::Relaxed) && Instant::now() < stop_at {
                let read = client.read_tags(&["Pump1.MotorCurrent"]).await;
                reads.push((
                    Instant::now(),
                    read.map(|_| ()).map_err(|error| error.to_string()),
                ));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            (reads, client.failovers())
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let killed = Instant::now();
    drop(first);
    tokio::time::sleep(Duration::from_secs(3)).await;
    running.store(false, Ordering::Relaxed);

    let mut moved = 0;
    for panel in panels {
        let (reads, failovers) = panel.await.expect("the panel did not panic");
        moved += usize::from(failovers > 0);
        // Reads change nothing: one broken under a kill is sent again on the next connection,
        // so a panel sees no error at all.
        let errors: Vec<&String> = reads.iter().filter_map(|(_, read)| read.as_ref().err()).collect();
        assert!(errors.is_empty(), "reads failed: {errors:?}");
        let back = reads
            .iter()
            .find(|(at, read)| *at > killed && read.is_ok())
            .map(|(at, _)| at.duration_since(killed))
            .expect("a read succeeded after the kill");
        assert!(back < Duration::from_secs(2), "a panel was back after {back:?}");
        // And it kept reading: no panel stalled after its first read on the new node.
        assert!(reads.iter().filter(|(at, _)| *at > killed).count() > 20);
    }
    assert!((1..PANELS).contains(&moved), "{moved} of {PANELS} panels moved");
    let states = haproxy.node_states().await;
    assert_eq!(states.len(), 2);
    assert!(states[0].starts_with("DOWN"), "{states:?}");
    drop(second);
}
