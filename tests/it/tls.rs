//! TLS for display clients: `tserver serve --tls-cert --tls-key` and `tclient --tls-ca`, end to
//! end over real sockets, with certificates made for the test, by openssl as users make them,
//! and by `tserver tls create`; each mistake answered by `tclient` (a process) in one sentence.

use std::path::{Path, PathBuf};

use clap::Parser;
use service_client::{Client, ClientError, ClientOptions, ClientTls, CloseReason};
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tserver::ServerConfig;
use tserver_tls::TlsError;

use crate::support::{PATIENCE, ServerProcess, Solution, TestServer, admin, try_admin};

/// A self-signed certificate for `localhost` and 127.0.0.1, written as PEM files.
struct Certificate {
    dir: TempDir,
}

impl Certificate {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("certificate");
        std::fs::write(dir.path().join("cert.pem"), made.cert.pem()).expect("write cert");
        std::fs::write(dir.path().join("key.pem"), made.signing_key.serialize_pem()).expect("write key");
        Self { dir }
    }

    fn cert(&self) -> PathBuf {
        self.dir.path().join("cert.pem")
    }

    fn key(&self) -> PathBuf {
        self.dir.path().join("key.pem")
    }
}

fn tls_options(ca: &Path, server_name: Option<&str>) -> ClientOptions {
    ClientOptions {
        tls: Some(ClientTls {
            config: tserver_tls::client_config(ca).expect("CA loads"),
            server_name: server_name.map(str::to_owned),
        }),
        ..ClientOptions::default()
    }
}

/// `tserver serve` with TLS, parsed from its command line, on a listener bound to port 0, and
/// its HTTP surface (`--http`) on a port that was free a moment before.
struct TlsServe {
    addr: std::net::SocketAddr,
    http: std::net::SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl TlsServe {
    async fn start(solution: &Path, certificate: &Certificate) -> Self {
        let (cert, key) = (certificate.cert(), certificate.key());
        let http = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|free| free.local_addr())
            .expect("a free port");
        let http_text = http.to_string();
        let args = [
            "tserver",
            "serve",
            "--solution",
            solution.to_str().expect("utf-8"),
            "--tls-cert",
            cert.to_str().expect("utf-8"),
            "--tls-key",
            key.to_str().expect("utf-8"),
            "--simulator",
            "off",
            "--http",
            &http_text,
        ];
        let cli = tserver::cli::Cli::try_parse_from(args).expect("arguments parse");
        let tserver::cli::Command::Serve(serve) = cli.command else {
            panic!("parsed as serve")
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let shutdown = CancellationToken::new();
        let task = tokio::spawn({
            let shutdown = shutdown.clone();
            async move { tserver::cli::serve_on(&serve, listener, shutdown).await }
        });
        Self {
            addr,
            http,
            shutdown,
            task,
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(PATIENCE, self.task)
            .await
            .expect("stops in time")
            .expect("no panic")
            .expect("serve ends cleanly");
    }
}

#[tokio::test]
async fn a_client_that_trusts_the_certificate_logs_in_pings_and_chats_over_tls() {
    let solution = Solution::demo();
    let certificate = Certificate::new();
    let server = TlsServe::start(&solution.path, &certificate).await;

    // By IP address (the default name is the host of the address) and by DNS name.
    for name in [None, Some("localhost")] {
        let client = Client::connect(server.addr, tls_options(&certificate.cert(), name))
            .await
            .expect("TLS connects");
        client.login("guest", "").await.expect("logs in");
        assert!(client.ping().await.is_ok());
        let readings = client.read_tags(&["Pump1.MotorCurrent"]).await.expect("reads");
        assert_eq!(readings.len(), 1);
        let envelope = client.chat("hello").await.expect("an envelope");
        assert!(envelope.contains("\"status\""), "{envelope}");
    }

    // tclient with --tls-ca, through its command line.
    let cli = tclient::cli::Cli::try_parse_from([
        "tclient",
        "--addr",
        &server.addr.to_string(),
        "--tls-ca",
        certificate.cert().to_str().expect("utf-8"),
        "ping",
    ])
    .expect("tclient arguments parse");
    let mut output = Vec::new();
    tclient::cli::run(&cli, &mut "".as_bytes(), &mut output, Default::default())
        .await
        .expect("tclient pings over TLS");
    assert!(String::from_utf8_lossy(&output).starts_with("pong from"));

    // The HTTP surface speaks HTTPS with the same certificate (and wants its token).
    let https = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(&std::fs::read(certificate.cert()).expect("PEM")).expect("PEM"),
        )
        .build()
        .expect("client");
    let url = format!("https://localhost:{}/mcp", server.http.port());
    let mut answer = Err(None);
    for _ in 0..50 {
        match https.post(&url).send().await {
            Ok(response) => {
                answer = Ok(response.status());
                break;
            }
            // The HTTP listener starts beside the TCP one; give it a moment.
            Err(error) => answer = Err(Some(error)),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(answer.expect("HTTPS answers"), reqwest::StatusCode::UNAUTHORIZED);
    // `serve` tells the HTTP surface whether its TCP listener accepts: ready, no token asked.
    let ready = https
        .get(format!("https://localhost:{}/readyz", server.http.port()))
        .send()
        .await
        .expect("HTTPS answers");
    assert_eq!(ready.status(), reqwest::StatusCode::OK);
    assert!(
        ready.text().await.expect("a body").contains("\"accepting\""),
        "the listener accepts"
    );
    server.stop().await;
}

#[tokio::test]
async fn wrong_trust_wrong_name_and_plain_text_are_refused_cleanly_and_harm_no_one() {
    let solution = Solution::demo();
    let certificate = Certificate::new();
    let stranger = Certificate::new();
    let server = TlsServe::start(&solution.path, &certificate).await;
    let bystander = Client::connect(server.addr, tls_options(&certificate.cert(), None))
        .await
        .expect("TLS connects");
    bystander.login("guest", "").await.expect("logs in");

    let untrusted = Client::connect(server.addr, tls_options(&stranger.cert(), None)).await;
    assert!(matches!(untrusted, Err(ClientError::Tls { .. })), "{untrusted:?}");
    let misnamed = Client::connect(
        server.addr,
        tls_options(&certificate.cert(), Some("plant.example")),
    )
    .await;
    assert!(matches!(misnamed, Err(ClientError::Tls { .. })), "{misnamed:?}");

    // A plain client's Hello is not TLS: the server closes without a reply.
    let plain = Client::connect(server.addr, ClientOptions::default())
        .await
        .expect("TCP connects");
    match plain.login("guest", "").await {
        Err(ClientError::ConnectionLost {
            reason: CloseReason::ServerClosed | CloseReason::Transport(_) | CloseReason::Protocol(_),
        }) => {}
        other => panic!("expected the plain client to be dropped, got {other:?}"),
    }
    assert!(bystander.ping().await.is_ok(), "the TLS client goes on");
    server.stop().await;

    // A TLS client against a plain server fails the handshake with a typed error.
    let plain_server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let refused = Client::connect(plain_server.addr, tls_options(&certificate.cert(), None)).await;
    assert!(matches!(refused, Err(ClientError::Tls { .. })), "{refused:?}");
    plain_server.stop().await;
}

#[test]
fn bad_certificate_files_are_typed_errors_that_name_the_file() {
    let certificate = Certificate::new();
    let other = Certificate::new();
    let missing = certificate.dir.path().join("missing.pem");
    let not_pem = certificate.dir.path().join("not.pem");
    std::fs::write(&not_pem, "hello").expect("write");

    let error = tserver_tls::server_config(&missing, &certificate.key()).expect_err("missing");
    assert!(matches!(error, TlsError::Read { .. }) && error.to_string().contains("missing.pem"));
    let error = tserver_tls::server_config(&not_pem, &certificate.key()).expect_err("not PEM");
    assert!(matches!(error, TlsError::Pem { .. }) && error.to_string().contains("not.pem"));
    let error = tserver_tls::server_config(&certificate.cert(), &not_pem).expect_err("no key");
    assert!(matches!(error, TlsError::Pem { .. }));
    // The key file's contents never show in the message.
    let key_text = std::fs::read_to_string(certificate.key()).expect("read key");
    let error = tserver_tls::server_config(&certificate.key(), &certificate.key())
        .expect_err("a key is no certificate");
    assert!(
        !error
            .to_string()
            .contains(key_text.lines().nth(1).expect("a key line"))
    );
    let error = tserver_tls::server_config(&certificate.cert(), &other.key()).expect_err("mismatched key");
    assert!(matches!(error, TlsError::Config(_)), "{error}");
    assert!(matches!(
        tserver_tls::client_config(&not_pem),
        Err(TlsError::Pem { .. })
    ));
    assert!(tserver_tls::server_name("not a name!").is_err());

    // The command line refuses a certificate without its key.
    let half =
        tserver::cli::Cli::try_parse_from(["tserver", "serve", "--solution", "x.db", "--tls-cert", "c.pem"]);
    assert!(half.is_err());
}

/// `tclient ARGS...` as a process: whether it succeeded, and what it printed.
fn tclient_process(args: &[&str]) -> (bool, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tclient-under-test"))
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .env("RUST_LIB_BACKTRACE", "0")
        .output()
        .expect("tclient runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// Runs `tclient --addr ADDR EXTRA... ping`, expecting it to fail saying `wanted`.
fn ping_fails_saying(addr: &str, extra: &[&str], wanted: &str) {
    let mut args = vec!["--addr", addr];
    args.extend_from_slice(extra);
    args.push("ping");
    let (ok, said) = tclient_process(&args);
    assert!(!ok, "{args:?} should fail: {said}");
    assert!(said.contains(wanted), "{args:?}: {said}");
    assert_eq!(said.trim().lines().count(), 1, "one sentence: {said}");
}

/// A self-signed certificate made as users make them with openssl (`CA:TRUE`, the default).
fn openssl_self_signed(dir: &Path) -> (PathBuf, PathBuf) {
    openssl_certificate(dir, &["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
}

/// `openssl req -x509 ... -subj /CN=localhost EXTRA...` in `dir`: the certificate and its key.
fn openssl_certificate(dir: &Path, extra: &[&str]) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("c.pem"), dir.join("k.pem"));
    let made = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .args(["-subj", "/CN=localhost"])
        .args(extra)
        .output()
        .expect("openssl runs: install it (apt-get install openssl)");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    (cert, key)
}

#[test]
fn certificates_as_users_make_them_work_and_each_mistake_gets_one_sentence() {
    let solution = Solution::demo();
    let dir = tempfile::tempdir().expect("dir");
    let text = |path: &Path| path.to_str().expect("utf-8").to_owned();

    // openssl's default self-signed certificate, pinned by the client.
    let (openssl_cert, openssl_key) = openssl_self_signed(dir.path());
    let served = ServerProcess::start(
        &solution.path,
        &[
            "--tls-cert",
            &text(&openssl_cert),
            "--tls-key",
            &text(&openssl_key),
        ],
        &[],
    );
    let addr = served.addr.to_string();
    let by_name = format!("localhost:{}", served.addr.port());
    for target in [&addr, &by_name] {
        let (ok, said) = tclient_process(&["--addr", target, "--tls-ca", &text(&openssl_cert), "ping"]);
        assert!(ok && said.starts_with("pong from"), "{target}: {said}");
    }
    // A plain client, a name the certificate does not carry, a CA that did not sign it.
    ping_fails_saying(&addr, &[], "the server speaks TLS on this port");
    ping_fails_saying(
        &addr,
        &["--tls-ca", &text(&openssl_cert), "--tls-name", "plant.example"],
        "is not made out to \"plant.example\" but to localhost, 127.0.0.1",
    );
    let made = dir.path().join("made");
    let said = admin(
        &[
            "tls",
            "create",
            "--host",
            "localhost",
            "--host",
            "127.0.0.1",
            "--dir",
            &text(&made),
        ],
        "",
    );
    assert!(said.contains("tclient --tls-ca"), "{said}");
    ping_fails_saying(
        &addr,
        &["--tls-ca", &text(&made.join("ca.pem"))],
        "is a CA certificate (as openssl's default self-signed one is) and not in the CA file",
    );
    drop(served);

    // `tserver tls create`: a private CA and the server's certificate it signed.
    let served = ServerProcess::start(
        &solution.path,
        &[
            "--tls-cert",
            &text(&made.join("server.pem")),
            "--tls-key",
            &text(&made.join("server-key.pem")),
        ],
        &[],
    );
    let addr = served.addr.to_string();
    let (ok, said) = tclient_process(&["--addr", &addr, "--tls-ca", &text(&made.join("ca.pem")), "ping"]);
    assert!(ok && said.starts_with("pong from"), "{said}");
    ping_fails_saying(
        &addr,
        &["--tls-ca", &text(&openssl_cert)],
        "is not signed by a certificate in the CA file",
    );
    // The files are never overwritten.
    let again = try_admin(
        &["tls", "create", "--host", "localhost", "--dir", &text(&made)],
        "",
    )
    .expect_err("exists");
    assert!(format!("{again:#}").contains("exists already"), "{again:#}");
    drop(served);

    // An expired certificate.
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params =
        rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).expect("params");
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let expired = params.self_signed(&key).expect("certificate");
    let (expired_cert, expired_key) = (dir.path().join("expired.pem"), dir.path().join("expired-key.pem"));
    std::fs::write(&expired_cert, expired.pem()).expect("writes");
    std::fs::write(&expired_key, key.serialize_pem()).expect("writes");
    let served = ServerProcess::start(
        &solution.path,
        &[
            "--tls-cert",
            &text(&expired_cert),
            "--tls-key",
            &text(&expired_key),
        ],
        &[],
    );
    ping_fails_saying(
        &served.addr.to_string(),
        &["--tls-ca", &text(&expired_cert)],
        "the server's certificate has expired",
    );
    drop(served);

    // A TLS client at a plain server.
    let served = ServerProcess::start(&solution.path, &[], &[]);
    ping_fails_saying(
        &served.addr.to_string(),
        &["--tls-ca", &text(&openssl_cert)],
        "the server does not speak TLS on this port",
    );
}

#[tokio::test]
async fn a_plain_port_tells_a_tls_client_it_speaks_plain_tcp() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let mut socket = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connects");
    // The start of a TLS 1.2 ClientHello record, read by a plain port as a frame length.
    socket
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc])
        .await
        .expect("writes");
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, socket.read_to_end(&mut answer))
        .await
        .expect("closed in time")
        .expect("reads");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.contains("this port speaks plain TCP, not TLS"), "{answer}");
    server.stop().await;
}

#[test]
fn a_certificate_without_subject_alt_name_is_named_as_such() {
    let solution = Solution::demo();
    let dir = tempfile::tempdir().expect("dir");
    let text = |path: &Path| path.to_str().expect("utf-8").to_owned();
    let (cert, key) = openssl_certificate(dir.path(), &[]);
    let served = ServerProcess::start(
        &solution.path,
        &["--tls-cert", &text(&cert), "--tls-key", &text(&key)],
        &[],
    );
    ping_fails_saying(
        &format!("localhost:{}", served.addr.port()),
        &["--tls-ca", &text(&cert)],
        "the server's certificate names no host: add subjectAltName",
    );
}
