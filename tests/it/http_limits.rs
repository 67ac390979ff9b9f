//! The HTTP surface's connection limits, over real sockets: silent connections past the cap
//! never stop a display-port login nor `/healthz` (in a process held to a small open-file
//! limit, as a plant's would be), nor does a flood past the display port's cap; serve refuses to start when the caps do not fit that limit,
//! a slowloris head and a body trickling a byte at a time are closed within their timeouts,
//! an idle keep-alive connection is closed, and connections past the cap while every seat
//! answers a request still get the health checks, and 503 for the rest.

use std::net::SocketAddr;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tserver::http_surface::HttpConfig;

use crate::mcp::McpRig;
use crate::support::{PATIENCE, RawConnection, ServerProcess, Solution, admin};

/// Generous bound for the server to close something whose timeout is about a second.
const CLOSE_BOUND: Duration = Duration::from_secs(30);

/// One request on a fresh connection (`Connection: close`): the whole response.
async fn request(addr: SocketAddr, head: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connects");
    stream.write_all(head.as_bytes()).await.expect("sends");
    let mut response = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut response))
        .await
        .expect("answered and closed within the patience")
        .expect("reads");
    String::from_utf8_lossy(&response).into_owned()
}

fn healthz(addr: SocketAddr) -> String {
    format!(
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
        addr.port()
    )
}

/// Whether the server closes `stream` (end of stream or reset) within [`CLOSE_BOUND`], reading
/// and discarding whatever it sends first.
async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut buffer = [0u8; 1024];
    let reading = async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(CLOSE_BOUND, reading).await.is_ok()
}

/// Opens `count` connections to `addr` that never send a byte, and a task per connection that
/// completes when the server closes it.
async fn silent_connections(addr: SocketAddr, count: usize) -> FuturesUnordered<tokio::task::JoinHandle<()>> {
    let closes = FuturesUnordered::new();
    for _ in 0..count {
        let mut stream = TcpStream::connect(addr).await.expect("connects");
        closes.push(tokio::spawn(async move {
            let mut buffer = [0u8; 256];
            // Held open until the server closes it (or the test ends and aborts the task).
            while let Ok(read) = stream.read(&mut buffer).await {
                if read == 0 {
                    break;
                }
            }
        }));
    }
    closes
}

/// Waits until at least `wanted` of `closes` completed, within [`CLOSE_BOUND`]; how many did.
async fn wait_for_closes(closes: &mut FuturesUnordered<tokio::task::JoinHandle<()>>, wanted: usize) -> usize {
    let mut closed = 0;
    let _ = tokio::time::timeout(CLOSE_BOUND, async {
        while closed < wanted && closes.next().await.is_some() {
            closed += 1;
        }
    })
    .await;
    closed
}

#[tokio::test]
async fn silent_http_connections_past_the_cap_leave_the_display_port_and_healthz_answering() {
    let solution = Solution::demo();
    let http = tserver_tests::haproxy::free_loopback_addr();
    let http_arg = http.to_string();
    // 100 + 50 + 16 overflow + 256 reserved = 422 descriptors of 500: without the cap, 1,000
    // silent connections took them all and the framed port's accept failed (EMFILE).
    let server = ServerProcess::start_with_open_files(
        &solution.path,
        &[
            "--http",
            &http_arg,
            "--max-connections",
            "100",
            "--http-max-connections",
            "50",
            // Long, so only the cap can be what closes the silent connections.
            "--http-header-timeout-secs",
            "120",
        ],
        500,
    );
    let silent = 1_000;
    let mut closes = silent_connections(http, silent).await;
    // Each newcomer past the cap takes the oldest idle seat: all but the newest 50 close.
    let closed = wait_for_closes(&mut closes, silent - 50).await;
    assert!(
        closed >= silent - 50,
        "only {closed} of {silent} silent connections were closed; the cap is 50"
    );
    let _login = RawConnection::guest(server.addr).await;
    let response = request(http, &healthz(http)).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let failures = server
        .log()
        .lines
        .iter()
        .filter(|line| line.contains("accept failed"))
        .count();
    assert_eq!(failures, 0, "no accept ran out of file descriptors");
    drop(closes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_past_the_display_ports_cap_leaves_logins_and_healthz_answering() {
    let solution = Solution::demo();
    let certificates = tempfile::tempdir().expect("a temporary directory");
    let dir = certificates.path().to_str().expect("utf-8").to_owned();
    admin(&["tls", "create", "--host", "localhost", "--dir", &dir], "");
    let (cert, key, ca) = (
        format!("{dir}/server.pem"),
        format!("{dir}/server-key.pem"),
        format!("{dir}/ca.pem"),
    );
    let http = tserver_tests::haproxy::free_loopback_addr();
    let http_arg = http.to_string();
    // 2 + 50 + 16 + 256 = 324 descriptors of 400. A refusal on a TLS port waits up to a second
    // for the handshake that carries it: unbounded, silent ones took every descriptor left.
    let server = ServerProcess::start_with_open_files(
        &solution.path,
        &[
            "--http",
            &http_arg,
            "--max-connections",
            "2",
            "--http-max-connections",
            "50",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
        ],
        400,
    );
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(TcpStream::connect(server.addr).await.expect("connects"));
    }
    // Made all at once, so their refusals overlap.
    let addr = server.addr;
    let refused: Vec<TcpStream> = futures::future::join_all((0..1_500).map(|_| TcpStream::connect(addr)))
        .await
        .into_iter()
        .map(|stream| stream.expect("connects"))
        .collect();
    let https = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(&std::fs::read(&ca).expect("reads the CA")).expect("a CA"),
        )
        .resolve("localhost", http)
        .timeout(PATIENCE)
        .build()
        .expect("a client");
    let health = https
        .get(format!("https://localhost:{}/healthz", http.port()))
        .send()
        .await
        .expect("/healthz answers");
    assert_eq!(health.status(), 200);
    // The two held seats are silent: the login deadline frees them for a login.
    drop(held);
    let addr = server.addr.to_string();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_tclient-under-test"))
            .args([
                "--addr",
                &addr,
                "--tls-ca",
                &ca,
                "--tls-name",
                "localhost",
                "ping",
            ])
            .output()
            .await
            .expect("tclient runs");
        let said = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() && said.starts_with("pong from") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no login: {said}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let failures = server
        .log()
        .lines
        .iter()
        .filter(|line| line.contains("accept failed"))
        .count();
    assert_eq!(failures, 0, "no accept ran out of file descriptors");
    drop(refused);
}

#[test]
fn serve_refuses_to_start_when_the_caps_do_not_fit_the_open_file_limit() {
    let solution = Solution::demo();
    let mut child = crate::support::limited_open_files(300)
        .args(["serve", "--solution"])
        .arg(&solution.path)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
            "--simulator",
            "off",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("tserver runs");
    // A server that starts anyway would serve until killed: give it the patience, no more.
    let deadline = std::time::Instant::now() + PATIENCE;
    while child.try_wait().expect("waits").is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let output = child.wait_with_output().expect("its output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    // 1024 + 512 + 16 + 256 = 1808 > 300, said with what to change.
    assert!(
        stderr.contains("the open-file limit is 300")
            && stderr.contains("--max-connections 1024")
            && stderr.contains("--http-max-connections 512")
            && stderr.contains("ulimit -n 1808")
            && stderr.contains("LimitNOFILE=1808"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_slowloris_head_is_closed_within_the_header_timeout() {
    let rig = McpRig::start_with(HttpConfig {
        header_timeout: Duration::from_secs(1),
        ..HttpConfig::default()
    })
    .await;
    let stream = TcpStream::connect(rig.http).await.expect("connects");
    let (mut reader, mut writer) = stream.into_split();
    let trickle = tokio::spawn(async move {
        let _ = writer
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await;
        // One header line every 200 ms, for at most a minute: never a whole head.
        for line in 0..300 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if writer
                .write_all(format!("X-Slow-{line}: a\r\n").as_bytes())
                .await
                .is_err()
            {
                return true;
            }
        }
        false
    });
    let mut response = Vec::new();
    let read = tokio::time::timeout(CLOSE_BOUND, reader.read_to_end(&mut response)).await;
    assert!(
        read.is_ok(),
        "the server kept a slowloris head open for {CLOSE_BOUND:?}"
    );
    let response = String::from_utf8_lossy(&response);
    assert!(
        !response.contains("200 OK"),
        "an unfinished head is not answered: {response}"
    );
    trickle.abort();
    rig.stop().await;
}

#[tokio::test]
async fn a_body_trickling_a_byte_at_a_time_is_answered_408_and_closed() {
    let rig = McpRig::start_with(HttpConfig {
        body_timeout: Duration::from_secs(1),
        ..HttpConfig::default()
    })
    .await;
    let stream = TcpStream::connect(rig.http).await.expect("connects");
    let (mut reader, mut writer) = stream.into_split();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: {}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: 1000\r\n\r\n",
        rig.http.port(),
        rig.bearer
    );
    writer.write_all(head.as_bytes()).await.expect("sends the head");
    let trickle = tokio::spawn(async move {
        // A byte every 250 ms, steadily, for at most 250 s: the deadline is for the whole body.
        for _ in 0..1000 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            if writer.write_all(b" ").await.is_err() {
                return;
            }
        }
    });
    let mut response = Vec::new();
    let read = tokio::time::timeout(CLOSE_BOUND, reader.read_to_end(&mut response)).await;
    assert!(
        read.is_ok(),
        "the server kept a trickling body open for {CLOSE_BOUND:?}"
    );
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 408"), "{response}");
    assert!(response.contains("--http-body-timeout-secs"), "{response}");
    trickle.abort();
    rig.stop().await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let rig = McpRig::start_with(HttpConfig {
        header_timeout: Duration::from_secs(1),
        ..HttpConfig::default()
    })
    .await;
    let mut stream = TcpStream::connect(rig.http).await.expect("connects");
    let head = format!(
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n",
        rig.http.port()
    );
    stream.write_all(head.as_bytes()).await.expect("sends");
    // The whole response (a kept-alive connection stays open after it).
    let mut response = Vec::new();
    let mut buffer = [0u8; 512];
    while !String::from_utf8_lossy(&response).ends_with("ok\n") {
        let read = tokio::time::timeout(PATIENCE, stream.read(&mut buffer))
            .await
            .expect("answered")
            .expect("reads");
        assert_ne!(read, 0, "closed before the whole response: {response:?}");
        response.extend_from_slice(&buffer[..read]);
    }
    assert!(String::from_utf8_lossy(&response).starts_with("HTTP/1.1 200"));
    assert!(
        closed_by_server(&mut stream).await,
        "an idle keep-alive connection was kept for {CLOSE_BOUND:?}"
    );
    rig.stop().await;
}

#[tokio::test]
async fn past_the_cap_idle_connections_give_way_and_busy_ones_leave_the_health_checks() {
    let rig = McpRig::start_with(HttpConfig {
        max_connections: 4,
        header_timeout: Duration::from_secs(120),
        body_timeout: Duration::from_secs(120),
        ..HttpConfig::default()
    })
    .await;
    // Silent connections past the cap: each newcomer takes the oldest idle seat.
    let mut closes = silent_connections(rig.http, 20).await;
    let closed = wait_for_closes(&mut closes, 16).await;
    assert!(closed >= 16, "only {closed} of 20 closed; the cap is 4");
    let response = request(rig.http, &healthz(rig.http)).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    drop(closes);

    // Four requests whose bodies are still coming hold every seat. A seat is taken when its
    // request's head has been read, and an idle one goes to a newcomer: one evicted before its
    // head was read is opened again.
    let busy_head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: {}\r\n\
         Content-Type: application/json\r\nContent-Length: 10\r\n\r\n",
        rig.http.port(),
        rig.bearer
    );
    let newcomer = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: {}\r\n\
         Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}",
        rig.http.port(),
        rig.bearer
    );
    let mut busy: Vec<Option<TcpStream>> = (0..4).map(|_| None).collect();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let refused = loop {
        for slot in &mut busy {
            let open = slot.as_ref().is_some_and(|stream| {
                let mut byte = [0u8; 1];
                matches!(stream.try_read(&mut byte), Err(error) if error.kind() == std::io::ErrorKind::WouldBlock)
            });
            if !open {
                let mut stream = TcpStream::connect(rig.http).await.expect("connects");
                stream.write_all(busy_head.as_bytes()).await.expect("sends");
                *slot = Some(stream);
            }
        }
        let response = request(rig.http, &newcomer).await;
        if response.starts_with("HTTP/1.1 503") || tokio::time::Instant::now() > deadline {
            break response;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(
        refused.to_ascii_lowercase().contains("retry-after: 1") && refused.contains("--http-max-connections"),
        "{refused}"
    );
    let response = request(rig.http, &healthz(rig.http)).await;
    assert!(
        response.starts_with("HTTP/1.1 200"),
        "health past the cap: {response}"
    );
    drop(busy);
    rig.stop().await;
}
