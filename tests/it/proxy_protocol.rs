//! The client's real address behind proxies: through the shipped HAProxy (`send-proxy-v2`),
//! one client's wrong passwords lock out that client only and the log names it; on the framed
//! port a PROXY header (v1 or v2) is read only from a trusted proxy, which must send one, before
//! the TLS handshake on a TLS port; the audit records the client it names; on the HTTP surface
//! `X-Forwarded-For` is believed from a trusted proxy only.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use store::LoginThrottleConfig;
use tokio::io::AsyncWriteExt;
use tserver::ServerConfig;
use tserver::proxy::{TrustedNetwork, TrustedProxies};
use tserver_proto::v1::{ErrorCode, server_frame};
use tserver_tests::haproxy::{Haproxy, Node, free_loopback_addr};

use crate::support::{PATIENCE, RawConnection, ServerProcess, Solution, TestServer, admin, error_of, hello};

fn ip(text: &str) -> IpAddr {
    text.parse().expect("an address")
}

/// What became of a Hello.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    LoggedIn,
    Refused(ErrorCode, String),
    /// Closed without a reply.
    Closed,
}

/// One Hello as `guest` from `source` on a fresh connection to `addr`, after `header` (a PROXY
/// header, or nothing).
async fn login_from(source: IpAddr, addr: SocketAddr, header: &[u8], password: &str) -> Outcome {
    let mut raw = RawConnection::connect_from(source, addr).await;
    if !header.is_empty() {
        raw.send_bytes(header).await;
    }
    raw.send(1, hello("guest", password)).await;
    let Some(reply) = raw.receive().await else {
        return Outcome::Closed;
    };
    match reply.body {
        Some(server_frame::Body::Hello(_)) => Outcome::LoggedIn,
        _ => {
            let (code, message) = error_of(&reply);
            Outcome::Refused(code, message.to_owned())
        }
    }
}

/// A PROXY protocol v1 header naming `client` (to 127.0.0.1:3101).
fn v1(client: &str, port: u16) -> Vec<u8> {
    format!("PROXY TCP4 {client} 127.0.0.1 {port} 3101\r\n").into_bytes()
}

/// A PROXY protocol v2 header (`PROXY`, TCP over IPv4) naming `client`.
fn v2(client: [u8; 4], port: u16) -> Vec<u8> {
    let mut header = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    header.extend_from_slice(&[0x21, 0x11, 0, 12]);
    header.extend_from_slice(&client);
    header.extend_from_slice(&[127, 0, 0, 1]);
    header.extend_from_slice(&port.to_be_bytes());
    header.extend_from_slice(&3101u16.to_be_bytes());
    header
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_haproxy_one_clients_wrong_passwords_lock_out_that_client_only() {
    let solution = Solution::demo();
    let http = free_loopback_addr();
    let server = ServerProcess::start(
        &solution.path,
        &["--http", &http.to_string(), "--trusted-proxy", "127.0.0.1"],
        &[],
    );
    // The one node twice, so every connection meets the same throttle.
    let node = Node {
        listen: server.addr,
        http,
    };
    let haproxy = Haproxy::start([node, node]);
    haproxy.wait_until_all_up().await;
    let (first, second) = (ip("127.0.0.2"), ip("127.0.0.3"));

    // Five free failures, then the address is locked out: at most a few more attempts see it.
    let mut refusals = Vec::new();
    for _ in 0..10 {
        let refusal = login_from(first, haproxy.front, &[], "wrong").await;
        let throttled = matches!(refusal, Outcome::Refused(ErrorCode::LoginThrottled, _));
        refusals.push(refusal);
        if throttled {
            break;
        }
    }
    assert!(
        matches!(
            refusals.last(),
            Some(Outcome::Refused(ErrorCode::LoginThrottled, _))
        ),
        "the throttle counts the first client's failures: {refusals:?}"
    );
    assert!(refusals.len() >= 6, "five free failures first: {refusals:?}");
    // Another client's right password, through the same HAProxy, at once.
    assert_eq!(
        login_from(second, haproxy.front, &[], "").await,
        Outcome::LoggedIn
    );

    let lines = server.log().lines;
    let failures: Vec<&String> = lines
        .iter()
        .filter(|line| line.contains("login refused: unknown user or wrong password"))
        .collect();
    assert!(!failures.is_empty(), "{lines:#?}");
    assert!(
        failures.iter().all(|line| line.contains("peer=127.0.0.2:")),
        "the log names the client, not HAProxy: {failures:#?}"
    );
}

fn trusting_loopback(throttle: LoginThrottleConfig) -> ServerConfig {
    let network: TrustedNetwork = "127.0.0.1/32".parse().expect("a network");
    ServerConfig::default()
        .with_trusted_proxies(TrustedProxies::new(vec![network.0]))
        .with_login_throttle(throttle)
}

#[tokio::test]
async fn a_proxy_header_is_read_only_from_a_trusted_proxy_which_must_send_one() {
    let solution = Solution::demo();
    // Long lockouts: nothing here depends on how fast it runs.
    let server = TestServer::start(
        &solution.path,
        trusting_loopback(LoginThrottleConfig {
            free_failures: 2,
            first_lockout: Duration::from_secs(600),
            max_lockout: Duration::from_secs(600),
            ..LoginThrottleConfig::default()
        }),
    )
    .await;
    let (proxy, stranger) = (ip("127.0.0.1"), ip("127.0.0.2"));

    // From an untrusted address, a header of either version is refused, saying why.
    for header in [v1("198.51.100.7", 40000), v2([198, 51, 100, 7], 40000)] {
        let refusal = login_from(stranger, server.addr, &header, "").await;
        let Outcome::Refused(code, message) = refusal else {
            panic!("refused with a reason, not {refusal:?}");
        };
        assert_eq!(code, ErrorCode::FrameTooLarge);
        assert!(message.contains("--trusted-proxy"), "{message}");
    }
    // The stranger itself, without a header, is an ordinary client.
    assert_eq!(
        login_from(stranger, server.addr, &[], "").await,
        Outcome::LoggedIn
    );

    // A trusted proxy's connection without a header is closed unanswered.
    assert_eq!(login_from(proxy, server.addr, &[], "").await, Outcome::Closed);

    // With one, its client logs in, and the throttle counts that client.
    assert_eq!(
        login_from(proxy, server.addr, &v1("198.51.100.7", 40000), "").await,
        Outcome::LoggedIn
    );
    assert_eq!(
        login_from(proxy, server.addr, &v2([198, 51, 100, 7], 40001), "").await,
        Outcome::LoggedIn
    );
    let locked = v2([198, 51, 100, 8], 40002);
    for _ in 0..2 {
        let refusal = login_from(proxy, server.addr, &locked, "wrong").await;
        assert!(
            matches!(refusal, Outcome::Refused(ErrorCode::LoginFailed, _)),
            "{refusal:?}"
        );
    }
    let refusal = login_from(proxy, server.addr, &locked, "").await;
    assert!(
        matches!(refusal, Outcome::Refused(ErrorCode::LoginThrottled, _)),
        "{refusal:?}"
    );
    assert_eq!(
        login_from(proxy, server.addr, &v1("198.51.100.9", 40003), "").await,
        Outcome::LoggedIn,
        "another client of the same proxy is not locked out"
    );
    assert_eq!(
        login_from(stranger, server.addr, &[], "").await,
        Outcome::LoggedIn
    );
    server.stop().await;
}

#[tokio::test]
async fn on_a_tls_port_the_proxy_header_comes_before_the_handshake() {
    use futures::{SinkExt, StreamExt};
    use tserver_proto::v1::{ClientFrame, ServerFrame};
    use tserver_proto::{DEFAULT_MAX_FRAME, Decoded, FrameCodec};
    let solution = Solution::demo();
    let certificates = tempfile::tempdir().expect("a temporary directory");
    let dir = certificates.path();
    admin(
        &[
            "tls",
            "create",
            "--host",
            "localhost",
            "--dir",
            dir.to_str().expect("utf-8"),
        ],
        "",
    );
    let tls = tserver_tls::server_config(&dir.join("server.pem"), &dir.join("server-key.pem"))
        .expect("the server's certificate");
    let client_tls = tserver_tls::client_config(&dir.join("ca.pem")).expect("the CA");
    let runtime = tserver::Runtime::open(&solution.path).expect("opens");
    let config = trusting_loopback(LoginThrottleConfig {
        free_failures: 1,
        first_lockout: Duration::from_secs(600),
        max_lockout: Duration::from_secs(600),
        ..LoginThrottleConfig::default()
    });
    let server = tserver::Server::new(runtime, config)
        .expect("a server")
        .with_tls(tls);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("an address");
    let shutdown = tokio_util::sync::CancellationToken::new();
    let serving = tokio::spawn(server.run(listener, shutdown.clone()));

    let login = |client: [u8; 4], password: &'static str| {
        let client_tls = client_tls.clone();
        async move {
            let mut socket = tokio::net::TcpStream::connect(addr).await.expect("connects");
            socket
                .write_all(&v2(client, 40200))
                .await
                .expect("sends the header");
            let name = tserver_tls::rustls::pki_types::ServerName::try_from("localhost").expect("a name");
            let transport = tserver_proto::connect(&client_tls, name, socket)
                .await
                .expect("the handshake after the header");
            let mut framed = tokio_util::codec::Framed::new(
                transport,
                FrameCodec::<ServerFrame, ClientFrame>::new(DEFAULT_MAX_FRAME),
            );
            framed
                .send(ClientFrame {
                    call_id: 1,
                    body: Some(hello("guest", password)),
                })
                .await
                .expect("sends Hello");
            match tokio::time::timeout(PATIENCE, framed.next()).await {
                Ok(Some(Ok(Decoded::Message(frame)))) => match frame.body {
                    Some(server_frame::Body::Hello(_)) => Outcome::LoggedIn,
                    _ => {
                        let (code, message) = error_of(&frame);
                        Outcome::Refused(code, message.to_owned())
                    }
                },
                other => panic!("no reply: {other:?}"),
            }
        }
    };
    assert_eq!(login([198, 51, 100, 30], "").await, Outcome::LoggedIn);
    let refusal = login([198, 51, 100, 31], "wrong").await;
    assert!(
        matches!(refusal, Outcome::Refused(ErrorCode::LoginFailed, _)),
        "{refusal:?}"
    );
    let refusal = login([198, 51, 100, 31], "").await;
    assert!(
        matches!(refusal, Outcome::Refused(ErrorCode::LoginThrottled, _)),
        "{refusal:?}"
    );
    assert_eq!(login([198, 51, 100, 30], "").await, Outcome::LoggedIn);
    shutdown.cancel();
    tokio::time::timeout(PATIENCE, serving)
        .await
        .expect("stops")
        .expect("did not panic");
}

#[tokio::test]
async fn the_audit_records_the_client_a_trusted_proxy_names() {
    use tserver_proto::v1::{TagWrite, WriteTagsRequest, client_frame, tag_write};
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, trusting_loopback(LoginThrottleConfig::default())).await;
    let mut raw = RawConnection::connect_from(ip("127.0.0.1"), server.addr).await;
    raw.send_bytes(&v2([198, 51, 100, 20], 40100)).await;
    raw.send(1, hello("guest", "")).await;
    let reply = raw.receive().await.expect("a reply");
    assert!(
        matches!(reply.body, Some(server_frame::Body::Hello(_))),
        "{reply:?}"
    );
    // Every write asked for is audited, refused ones too.
    raw.send(
        2,
        client_frame::Body::WriteTags(WriteTagsRequest {
            writes: vec![TagWrite {
                name: "No.Such.Tag".into(),
                value: Some(tag_write::Value::Integer(1)),
            }],
            signatures: Vec::new(),
        }),
    )
    .await;
    let reply = raw.receive().await.expect("a reply");
    assert!(
        matches!(reply.body, Some(server_frame::Body::WriteTags(_))),
        "{reply:?}"
    );
    let audit = admin(&["audit", solution.path.to_str().expect("utf-8")], "");
    assert!(
        audit.contains(" write No.Such.Tag by guest (198.51.100.20:40100 on "),
        "{audit}"
    );
    server.stop().await;
}

#[tokio::test]
async fn forwarded_for_names_the_http_client_only_from_a_trusted_proxy() {
    let solution = Solution::demo();
    let http = free_loopback_addr();
    let server = ServerProcess::start(
        &solution.path,
        &["--http", &http.to_string(), "--trusted-proxy", "127.0.0.1"],
        &[("RUST_LOG", "info,tserver::http_surface=debug")],
    );
    for (source, forwarded) in [("127.0.0.1", "203.0.113.7"), ("127.0.0.2", "203.0.113.8")] {
        let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
        socket.bind(SocketAddr::new(ip(source), 0)).expect("binds");
        let mut stream = socket.connect(http).await.expect("connects");
        let request = format!(
            "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: {forwarded}\r\n\
             Connection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.expect("sends");
        let mut response = Vec::new();
        tokio::time::timeout(
            PATIENCE,
            tokio::io::AsyncReadExt::read_to_end(&mut stream, &mut response),
        )
        .await
        .expect("answered")
        .expect("reads");
        assert!(
            response.starts_with(b"HTTP/1.1 401"),
            "{}",
            String::from_utf8_lossy(&response)
        );
    }
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let refused = loop {
        let refused: Vec<String> = server
            .log()
            .lines
            .into_iter()
            .filter(|line| line.contains("HTTP request refused"))
            .collect();
        if refused.len() >= 2 || tokio::time::Instant::now() > deadline {
            break refused;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(refused.len(), 2, "{refused:#?}");
    assert!(
        refused[0].contains("client=203.0.113.7"),
        "from the trusted proxy: {refused:#?}"
    );
    assert!(
        refused[1].contains("client=127.0.0.2") && !refused[1].contains("203.0.113.8"),
        "from anyone else the header is ignored: {refused:#?}"
    );
}
