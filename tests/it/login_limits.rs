//! Login throttling per peer address, and the tighter limits on connections not logged in.

use std::time::Duration;

use service_client::ClientError;
use store::LoginThrottleConfig;
use tserver::ServerConfig;
use tserver_proto::v1::{ErrorCode, Ping, client_frame, server_frame};

use crate::support::{RawConnection, Solution, TestServer, admin, error_of, hello};

fn throttled(lockout: Duration) -> ServerConfig {
    ServerConfig::default().with_login_throttle(LoginThrottleConfig {
        free_failures: 2,
        first_lockout: lockout,
        max_lockout: lockout * 4,
        ..LoginThrottleConfig::default()
    })
}

/// One Hello on a fresh connection: the reply's error code, `None` for a successful login.
async fn try_login(server: &TestServer, user: &str, password: &str) -> Option<ErrorCode> {
    let mut raw = RawConnection::connect(server.addr).await;
    raw.send(1, hello(user, password)).await;
    let reply = raw.receive().await.expect("a reply to Hello");
    match reply.body {
        Some(server_frame::Body::Hello(_)) => None,
        _ => Some(error_of(&reply).0),
    }
}

#[tokio::test]
async fn failed_logins_lock_the_address_out_whatever_the_user_then_it_may_try_again() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path");
    admin(&["users", path, "add", "operator"], "right-pass\n");
    let lockout = Duration::from_millis(1500);
    let server = TestServer::start(&solution.path, throttled(lockout)).await;

    // The free failures are plain refusals; the last of them earns the lockout, so the very
    // next Hello (the third) is throttled, as the proto says.
    for password in ["guess-1", "guess-2"] {
        assert_eq!(
            try_login(&server, "operator", password).await,
            Some(ErrorCode::LoginFailed)
        );
    }
    // Locked out: the right password, an unknown user and a passwordless user are all refused
    // alike, so the lockout tells nothing about who exists.
    let mut messages = Vec::new();
    for (user, password) in [("operator", "right-pass"), ("nobody", "x"), ("guest", "")] {
        let mut raw = RawConnection::connect(server.addr).await;
        raw.send(1, hello(user, password)).await;
        let reply = raw.receive().await.expect("a refusal");
        let (code, message) = error_of(&reply);
        assert_eq!(code, ErrorCode::LoginThrottled);
        assert!(message.contains("try again in"), "{message}");
        messages.push(message.to_owned());
        assert!(
            raw.receive().await.is_none(),
            "a throttled login closes the connection"
        );
    }
    assert!(
        !messages
            .iter()
            .any(|m| m.contains("operator") || m.contains("right-pass"))
    );
    // The typed client error carries the code.
    let refused = server.client().await.login("operator", "right-pass").await;
    match refused {
        Err(error @ ClientError::Server { .. }) => {
            assert_eq!(error.server_code(), Some(ErrorCode::LoginThrottled));
        }
        other => panic!("expected a throttled login, got {other:?}"),
    }

    // After the lockout the right password works, and the success clears the record.
    tokio::time::sleep(lockout + Duration::from_millis(100)).await;
    assert_eq!(try_login(&server, "operator", "right-pass").await, None);
    assert_eq!(
        try_login(&server, "operator", "wrong").await,
        Some(ErrorCode::LoginFailed)
    );
    assert_eq!(try_login(&server, "guest", "").await, None);
    server.stop().await;
}

#[tokio::test]
async fn logged_in_clients_are_not_disturbed_by_a_locked_out_address() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, throttled(Duration::from_secs(60))).await;
    let operator = server.guest().await;
    for _ in 0..2 {
        try_login(&server, "guest", "wrong").await;
    }
    assert_eq!(
        try_login(&server, "guest", "").await,
        Some(ErrorCode::LoginThrottled)
    );
    assert!(operator.ping().await.is_ok(), "an existing session goes on");
    server.stop().await;
}

#[tokio::test]
async fn frames_before_login_are_small_and_few() {
    let solution = Solution::demo();
    let config = ServerConfig::default()
        .with_max_frame(64 * 1024)
        .with_max_login_frame(1024)
        .with_max_frames_before_login(3);
    let server = TestServer::start(&solution.path, config).await;

    // A frame over the login limit is refused before login...
    let mut raw = RawConnection::connect(server.addr).await;
    raw.send_bytes(&2048u32.to_be_bytes()).await;
    let reply = raw.receive().await.expect("a refusal");
    let (code, message) = error_of(&reply);
    assert_eq!(code, ErrorCode::FrameTooLarge);
    assert!(message.contains("1024"), "{message}");
    assert!(raw.receive().await.is_none());

    // ...and the same frame is fine once logged in.
    let mut raw = RawConnection::guest(server.addr).await;
    let padding = "x".repeat(2048);
    raw.send(
        2,
        client_frame::Body::ReadTags(tserver_proto::v1::ReadTagsRequest { names: vec![padding] }),
    )
    .await;
    assert_eq!(raw.receive().await.expect("a reply").call_id, 2);

    // Three frames before login are answered; the fourth closes the connection.
    let mut raw = RawConnection::connect(server.addr).await;
    for call_id in 1..=4 {
        raw.send(call_id, client_frame::Body::Ping(Ping { nonce: call_id }))
            .await;
    }
    for call_id in 1..=3 {
        let reply = raw.receive().await.expect("an error reply");
        assert_eq!(
            (reply.call_id, error_of(&reply).0),
            (call_id, ErrorCode::Unauthenticated)
        );
    }
    let last = raw.receive().await.expect("last words");
    assert_eq!(last.call_id, 0);
    let (code, message) = error_of(&last);
    assert_eq!(code, ErrorCode::Unauthenticated);
    assert!(message.contains("before logging in"), "{message}");
    assert!(raw.receive().await.is_none());
    server.stop().await;
}

#[tokio::test]
async fn a_full_waiting_room_gives_the_longest_silent_connections_seat_to_a_newcomer() {
    let solution = Solution::demo();
    let config = ServerConfig::default()
        .with_max_connections(10)
        .with_max_unauthenticated(2);
    let server = TestServer::start(&solution.path, config).await;
    let mut oldest = RawConnection::connect(server.addr).await;
    // The server admits connections in order; give it a moment to seat these two.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut younger = RawConnection::connect(server.addr).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    // A panel arriving at a full room logs in at once...
    let panel = server.guest().await;
    assert!(panel.ping().await.is_ok());
    // ...and the connection that waited longest without a word is told why and closed.
    let reply = oldest.receive().await.expect("a reason");
    let (code, message) = error_of(&reply);
    assert_eq!((reply.call_id, code), (0, ErrorCode::Busy));
    assert!(message.contains("longest silent"), "{message}");
    assert!(oldest.receive().await.is_none());

    // Seats go on turning over: with the room full again, the younger one is next. Logged-in
    // clients never count.
    let _newest = RawConnection::connect(server.addr).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let another = server.guest().await;
    let reply = younger.receive().await.expect("a reason");
    assert_eq!(error_of(&reply).0, ErrorCode::Busy);
    assert!(panel.ping().await.is_ok() && another.ping().await.is_ok());
    server.stop().await;
}

/// Waits until the server closes `client`'s connection and returns why.
async fn closed_reason(client: &service_client::Client) -> service_client::CloseReason {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(reason) = client.close_reason() {
            return reason;
        }
        assert!(std::time::Instant::now() < deadline, "the session was not ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn removing_a_user_or_changing_its_password_ends_its_sessions() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path");
    admin(&["users", path, "add", "operator"], "first-pass\n");
    admin(&["users", path, "add", "shift"], "shift-pass\n");
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let panels = [server.client().await, server.client().await];
    for panel in &panels {
        panel.login("operator", "first-pass").await.expect("logs in");
    }
    let shift = server.client().await;
    shift.login("shift", "shift-pass").await.expect("logs in");
    let bystander = server.guest().await;

    // Another process (the admin command) removes the user: both of its panels are told and
    // closed; other users' sessions go on.
    admin(&["users", path, "remove", "operator"], "");
    for panel in &panels {
        match closed_reason(panel).await {
            service_client::CloseReason::Server { code, message } => {
                assert_eq!(code, ErrorCode::Unauthenticated);
                assert!(message.contains("removed"), "{message}");
            }
            other => panic!("expected the server's reason, got {other:?}"),
        }
    }
    assert!(bystander.ping().await.is_ok());
    assert!(shift.ping().await.is_ok());

    // A new password ends the sessions logged in with the old one; the new one logs in.
    admin(&["users", path, "passwd", "shift"], "new-pass\n");
    match closed_reason(&shift).await {
        service_client::CloseReason::Server { code, message } => {
            assert_eq!(code, ErrorCode::Unauthenticated);
            assert!(message.contains("password or role was changed"), "{message}");
        }
        other => panic!("expected the server's reason, got {other:?}"),
    }
    let again = server.client().await;
    again
        .login("shift", "new-pass")
        .await
        .expect("the new password works");
    assert!(again.ping().await.is_ok());
    assert!(bystander.ping().await.is_ok(), "the guest was never touched");
    server.stop().await;
}
