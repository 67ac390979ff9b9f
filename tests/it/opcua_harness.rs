//! The OPC UA test server, as async-opcua's client sees it: anonymous reads of changing
//! values and a subscription to them, a writable setpoint, a status that follows the test's
//! command, Basic256Sha256 with a user name and password, a wrong password refused, and the
//! same server (port and certificate) after it is killed and started again.

use std::sync::Arc;
use std::time::Duration;

use opcua::client::{Client, ClientBuilder, DataChangeCallback, IdentityToken, Session};
use opcua::crypto::SecurityPolicy;
use opcua::types::{
    AttributeId, DataValue, MessageSecurityMode, MonitoredItemCreateRequest, NodeId, ReadValueId, StatusCode,
    TimestampsToReturn, Variant, WriteValue,
};
use tokio::task::JoinHandle;
use tserver_tests::opcua::{self as served, FlakyStatus, OpcUaServer, OpcUaServerOptions};

/// How long connecting, or one request, may take before the test fails.
const WITHIN: Duration = Duration::from_secs(30);
/// How many times a test looks again for a value to change.
const TRIES: usize = 100;
/// How long it waits between looks.
const PAUSE: Duration = Duration::from_millis(100);

fn start_server() -> OpcUaServer {
    OpcUaServer::start(OpcUaServerOptions::new(env!(
        "CARGO_BIN_EXE_opcua-server-under-test"
    )))
}

/// A client session with the event loop that keeps it, and what it needs alive.
struct Connected {
    session: Arc<Session>,
    event_loop: JoinHandle<StatusCode>,
    _client: Client,
    _pki: tempfile::TempDir,
}

impl Drop for Connected {
    fn drop(&mut self) {
        self.event_loop.abort();
    }
}

/// Connects to `server` on the endpoint with `policy` and `mode` as `identity`, retrying a
/// lost connection up to `retries` times; `Err` says why the session did not come up.
async fn connect(
    server: &OpcUaServer,
    policy: SecurityPolicy,
    mode: MessageSecurityMode,
    identity: IdentityToken,
    retries: i32,
) -> Result<Connected, String> {
    let pki = tempfile::tempdir().expect("temp dir");
    let mut client = ClientBuilder::new()
        .application_name("tserver-tests OPC UA client")
        .application_uri("urn:tserver-tests:opcua-client")
        .product_uri("urn:tserver-tests")
        .pki_dir(pki.path())
        .create_sample_keypair(true)
        .trust_server_certs(true)
        .session_retry_limit(retries)
        .session_retry_initial(Duration::from_millis(100))
        .session_retry_max(Duration::from_secs(1))
        .request_timeout(Duration::from_secs(10))
        .client()
        .map_err(|errors| errors.join("; "))?;
    let endpoint = (server.url(), policy.to_str(), mode);
    let (session, event_loop) = tokio::time::timeout(
        WITHIN,
        client.connect_to_matching_endpoint((endpoint.0.as_str(), endpoint.1, endpoint.2), identity),
    )
    .await
    .map_err(|_| "no endpoints within 30 s".to_owned())?
    .map_err(|error| format!("endpoint: {error}"))?;
    let mut event_loop = event_loop.spawn();
    tokio::select! {
        connected = tokio::time::timeout(WITHIN, session.wait_for_connection()) => {
            if connected != Ok(true) {
                event_loop.abort();
                return Err("no session within 30 s".to_owned());
            }
        }
        ended = &mut event_loop => {
            return Err(format!("the session ended: {ended:?}"));
        }
    }
    Ok(Connected {
        session,
        event_loop,
        _client: client,
        _pki: pki,
    })
}

async fn anonymous(server: &OpcUaServer) -> Connected {
    connect(
        server,
        SecurityPolicy::None,
        MessageSecurityMode::None,
        IdentityToken::Anonymous,
        2,
    )
    .await
    .expect("an anonymous session on the unsecured endpoint")
}

/// The node id `text` names.
fn node(text: &str) -> NodeId {
    text.parse().unwrap_or_else(|_| panic!("{text} is a node id"))
}

/// The values of `nodes`, within [`WITHIN`].
async fn read(session: &Session, nodes: &[NodeId]) -> Result<Vec<DataValue>, String> {
    let requests: Vec<ReadValueId> = nodes
        .iter()
        .map(|node| ReadValueId {
            node_id: node.clone(),
            attribute_id: AttributeId::Value as u32,
            ..Default::default()
        })
        .collect();
    tokio::time::timeout(WITHIN, session.read(&requests, TimestampsToReturn::Both, 0.0))
        .await
        .map_err(|_| "no answer within 30 s".to_owned())?
        .map_err(|error| error.to_string())
}

async fn read_one(session: &Session, node: &NodeId) -> DataValue {
    let mut values = read(session, std::slice::from_ref(node))
        .await
        .expect("the server answers the read");
    assert_eq!(values.len(), 1, "one value for one node");
    values.remove(0)
}

/// Writes `value` to `node`, returning the server's status for it.
async fn write(session: &Session, node: &NodeId, value: impl Into<Variant>) -> StatusCode {
    let request = WriteValue {
        node_id: node.clone(),
        attribute_id: AttributeId::Value as u32,
        value: DataValue::value_only(value),
        ..Default::default()
    };
    let statuses = tokio::time::timeout(WITHIN, session.write(&[request]))
        .await
        .expect("the server answers the write within 30 s")
        .expect("the server answers the write");
    assert_eq!(statuses.len(), 1, "one status for one write");
    statuses[0]
}

#[tokio::test]
async fn anonymous_client_reads_every_variable_and_sees_temp_change() {
    let server = start_server();
    let connected = anonymous(&server).await;
    let session = &connected.session;
    let index = session
        .get_namespace_index(served::NAMESPACE_URI)
        .await
        .expect("the server has the tests' namespace");
    assert_eq!(index, server.namespace_index());

    let nodes = [
        node(&server.node(served::TEMP)),
        node(&server.node(served::COUNT)),
        node(&server.node(served::RUNNING)),
        node(&server.node(served::NAME)),
        node(&format!("ns={index};i={}", served::NUMERIC_ID)),
        node(&format!("ns={index};g={}", served::GUID_ID)),
    ];
    let values = read(session, &nodes).await.expect("reads");
    for (node, value) in nodes.iter().zip(&values) {
        assert!(value.status().is_good(), "{node}: {value:?}");
    }
    let first = values[0].value.clone();
    assert!(matches!(first, Some(Variant::Double(_))), "{first:?}");
    assert!(matches!(values[1].value, Some(Variant::Int32(_))));
    assert_eq!(values[2].value, Some(Variant::Boolean(true)));
    assert_eq!(values[3].value, Some(Variant::from(served::NAME_VALUE)));
    assert_eq!(values[4].value, Some(Variant::Double(served::NUMERIC_VALUE)));
    assert_eq!(values[5].value, Some(Variant::Double(served::GUID_VALUE)));

    let mut changed = false;
    for _ in 0..TRIES {
        tokio::time::sleep(PAUSE).await;
        if read_one(session, &nodes[0]).await.value != first {
            changed = true;
            break;
        }
    }
    assert!(changed, "Temp changes");
}

#[tokio::test]
async fn a_subscription_on_temp_gets_its_changes() {
    let server = start_server();
    let connected = anonymous(&server).await;
    let session = &connected.session;
    let (deliver, mut delivered) = tokio::sync::mpsc::unbounded_channel();
    let subscription = tokio::time::timeout(
        WITHIN,
        session.create_subscription(
            Duration::from_millis(100),
            60,
            10,
            0,
            0,
            true,
            DataChangeCallback::new(move |value, _item| {
                let _ = deliver.send(value);
            }),
        ),
    )
    .await
    .expect("the server answers within 30 s")
    .expect("a subscription");
    let created = tokio::time::timeout(
        WITHIN,
        session.create_monitored_items(
            subscription,
            TimestampsToReturn::Both,
            vec![MonitoredItemCreateRequest::from(node(&server.node(served::TEMP)))],
        ),
    )
    .await
    .expect("the server answers within 30 s")
    .expect("a monitored item");
    assert!(created[0].result.status_code.is_good(), "{created:?}");

    let mut values = Vec::new();
    while values.len() < 3 {
        let value = tokio::time::timeout(WITHIN, delivered.recv())
            .await
            .expect("a change within 30 s")
            .expect("the session is running");
        values.push(value.value);
    }
    values.dedup();
    assert!(values.len() > 1, "Temp's notifications carry changes: {values:?}");
}

#[tokio::test]
async fn setpoint_keeps_what_a_client_writes() {
    let server = start_server();
    let connected = anonymous(&server).await;
    let session = &connected.session;
    let setpoint = node(&server.node(served::SETPOINT));

    // It keeps the type written too (async-opcua's server checks no scalar types), so a test
    // sees which type a client sent.
    assert_eq!(write(session, &setpoint, 7i32).await, StatusCode::Good);
    let value = read_one(session, &setpoint).await;
    assert_eq!(value.value, Some(Variant::Int32(7)));
    assert_eq!(write(session, &setpoint, 42.5).await, StatusCode::Good);
    let value = read_one(session, &setpoint).await;
    assert_eq!(value.value, Some(Variant::Double(42.5)));

    let temp = node(&server.node(served::TEMP));
    let refused = write(session, &temp, 1.0).await;
    assert!(refused.is_bad(), "Temp is read-only: {refused}");
    let value = read_one(session, &setpoint).await;
    assert_eq!(value.value, Some(Variant::Double(42.5)));
}

#[tokio::test]
async fn flaky_status_follows_the_test() {
    let mut server = start_server();
    let connected = anonymous(&server).await;
    let flaky = node(&server.node(served::FLAKY));
    for (status, is) in [
        (FlakyStatus::Bad, StatusCode::is_bad as fn(&StatusCode) -> bool),
        (FlakyStatus::Uncertain, StatusCode::is_uncertain),
        (FlakyStatus::Good, StatusCode::is_good),
    ] {
        server.set_flaky(status);
        let mut seen = false;
        for _ in 0..TRIES {
            if is(&read_one(&connected.session, &flaky).await.status()) {
                seen = true;
                break;
            }
            tokio::time::sleep(PAUSE).await;
        }
        assert!(seen, "Flaky's status turns {status:?}");
    }
}

#[tokio::test]
async fn user_and_password_over_basic256sha256() {
    let server = start_server();
    let (user, password) = server.credentials();
    for mode in [MessageSecurityMode::SignAndEncrypt, MessageSecurityMode::Sign] {
        let connected = connect(
            &server,
            SecurityPolicy::Basic256Sha256,
            mode,
            IdentityToken::new_user_name(user, password),
            2,
        )
        .await
        .unwrap_or_else(|error| panic!("a {mode:?} session as {user}: {error}"));
        let value = read_one(&connected.session, &node(&server.node(served::TEMP))).await;
        assert!(value.status().is_good(), "{mode:?}: {value:?}");
    }
    assert!(
        server
            .pki_dir()
            .join("trusted")
            .read_dir()
            .is_ok_and(|mut entries| entries.next().is_some()),
        "the server trusted the clients' certificates"
    );
}

#[tokio::test]
async fn a_wrong_password_and_an_anonymous_secure_session_are_refused() {
    let server = start_server();
    let (user, _) = server.credentials();
    let refused = connect(
        &server,
        SecurityPolicy::Basic256Sha256,
        MessageSecurityMode::SignAndEncrypt,
        IdentityToken::new_user_name(user, "not the password"),
        0,
    )
    .await;
    let reason = refused.err().expect("a wrong password is refused");
    assert!(
        reason.contains("BadIdentityTokenRejected"),
        "refused for the password: {reason}"
    );
    let refused = connect(
        &server,
        SecurityPolicy::Basic256Sha256,
        MessageSecurityMode::SignAndEncrypt,
        IdentityToken::Anonymous,
        0,
    )
    .await;
    let reason = refused
        .err()
        .expect("anonymous users are refused on a secure endpoint");
    // The secure endpoints offer no anonymous token, so the client finds none to use.
    assert!(
        reason.contains("BadSecurityPolicyRejected"),
        "refused for want of an anonymous token: {reason}"
    );
    let accepted = connect(
        &server,
        SecurityPolicy::None,
        MessageSecurityMode::None,
        IdentityToken::new_user_name(user, server.credentials().1),
        0,
    )
    .await;
    assert!(
        accepted.is_ok(),
        "the user is accepted on the unsecured endpoint: {:?}",
        accepted.err()
    );
}

#[tokio::test]
async fn after_kill_and_restart_the_same_server_takes_clients_again() {
    let mut server = start_server();
    let url = server.url();
    let certificate = served::certificate(&server.pki_dir()).expect("the server made its certificate");
    // Patient enough to outlast the restart: it keeps retrying for several seconds.
    let connected = connect(
        &server,
        SecurityPolicy::None,
        MessageSecurityMode::None,
        IdentityToken::Anonymous,
        20,
    )
    .await
    .expect("connects");
    let temp = node(&server.node(served::TEMP));
    assert!(read_one(&connected.session, &temp).await.status().is_good());

    server.kill();
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", server.port())).is_err(),
        "a killed server takes no connections"
    );
    server.restart();
    assert_eq!(server.url(), url, "the same port after the restart");
    assert_eq!(
        served::certificate(&server.pki_dir()),
        Some(certificate),
        "the same certificate after the restart"
    );

    let (user, password) = server.credentials();
    let fresh = connect(
        &server,
        SecurityPolicy::Basic256Sha256,
        MessageSecurityMode::SignAndEncrypt,
        IdentityToken::new_user_name(user, password),
        2,
    )
    .await
    .expect("a new client connects after the restart");
    assert!(read_one(&fresh.session, &temp).await.status().is_good());

    // Each read waits for the session at most its request timeout; the whole wait is bounded.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut back = false;
    for _ in 0..TRIES {
        if read(&connected.session, std::slice::from_ref(&temp))
            .await
            .is_ok_and(|values| values.first().is_some_and(|value| value.status().is_good()))
        {
            back = true;
            break;
        }
        if std::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(PAUSE).await;
    }
    assert!(back, "the first client's session comes back by itself");
}
