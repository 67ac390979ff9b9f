//! `GET /ws`: the WebSocket transport. A same-origin upgrade only (403 otherwise, before any
//! upgrade), a slot and a waiting-room seat of the display server taken before upgrading (503
//! when none is free), messages bounded by the frame limit, then the same session the TCP
//! listener runs, for the request's real client address, with the browser login of the
//! request's cookie (if any) for its Hello.
//!
//! The handshake is answered here and the upgraded connection handed to tokio-tungstenite
//! directly (not through axum's WebSocket type), so the session can send a large message in
//! fragments (`session/websocket_link.rs`): the library keeps its write buffer at the size of
//! the largest frame it wrote, for the socket's life.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::response::{IntoResponse, Response};
use http::header::{CONNECTION, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_VERSION, UPGRADE};
use http::{HeaderMap, HeaderValue, StatusCode};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

use super::ClientAddress;
use super::browser_login::{BrowserState, cookie_token, refusal, same_origin};

/// The first size of a WebSocket's read buffer.
const READ_BUFFER: usize = 4 * 1024;

/// `GET /ws`.
pub(super) async fn upgrade(
    State(state): State<BrowserState>,
    connected: Option<axum::Extension<ConnectInfo<SocketAddr>>>,
    address: Option<axum::Extension<ClientAddress>>,
    mut request: Request,
) -> Response {
    let headers = request.headers();
    if !same_origin(headers) {
        return refusal(
            StatusCode::FORBIDDEN,
            "refused: a WebSocket is opened only by a page of this server (Origin must equal Host)",
        );
    }
    let accept = match accept_key(headers) {
        Ok(accept) => accept,
        Err(refused) => return refusal(StatusCode::BAD_REQUEST, refused),
    };
    let Some(sessions) = &state.sessions else {
        return refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "the WebSocket needs the display server (tserver serve)",
        );
    };
    let Some(upgrading) = request.extensions_mut().remove::<hyper::upgrade::OnUpgrade>() else {
        return refusal(
            StatusCode::BAD_REQUEST,
            "refused: this connection cannot be upgraded to a WebSocket",
        );
    };
    let connected = connected.map(|connected| connected.0.0);
    let port = connected.map_or(0, |connected| connected.port());
    let peer = match address {
        Some(address) => SocketAddr::new(address.0.0, port),
        None => connected.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
    };
    let admission = match sessions.admit(peer.ip()) {
        Ok(admission) => admission,
        Err(refused) => return refusal(StatusCode::SERVICE_UNAVAILABLE, &refused.to_string()),
    };
    let browser = cookie_token(request.headers(), state.secure);
    // The socket's own bound is twice the limit, so a message just past the limit is still
    // read whole and refused with its reason (FRAME_TOO_LARGE) before the close; one past the
    // bound is refused as soon as its header shows its length.
    let bound = sessions.max_message().saturating_mul(2);
    let config = WebSocketConfig::default()
        // Most WebSockets sit idle between small messages: the read buffer starts small (the
        // library's default takes 128 KiB per socket at once) and grows only for a large one.
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(0)
        .max_message_size(Some(bound))
        .max_frame_size(Some(bound));
    tokio::spawn(async move {
        // The client went away during the handshake: its slot goes with the admission.
        let Ok(upgraded) = upgrading.await else {
            return;
        };
        let socket =
            WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config)).await;
        admission.serve(socket, peer, browser).await;
    });
    (
        StatusCode::SWITCHING_PROTOCOLS,
        [
            (CONNECTION, HeaderValue::from_static("upgrade")),
            (UPGRADE, HeaderValue::from_static("websocket")),
            (SEC_WEBSOCKET_ACCEPT, accept),
        ],
    )
        .into_response()
}

/// The `Sec-WebSocket-Accept` answering a WebSocket handshake's headers (RFC 6455, 4.2.1),
/// or what is wrong with them.
fn accept_key(headers: &HeaderMap) -> Result<HeaderValue, &'static str> {
    let has_token = |name, token: &str| {
        headers.get_all(name).iter().any(|value| {
            value
                .as_bytes()
                .split(|&byte| byte == b',')
                .any(|part| part.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
        })
    };
    if !has_token(UPGRADE, "websocket") {
        return Err("refused: /ws takes a WebSocket handshake (Upgrade: websocket)");
    }
    if !has_token(CONNECTION, "upgrade") {
        return Err("refused: a WebSocket handshake needs Connection: Upgrade");
    }
    if headers.get(SEC_WEBSOCKET_VERSION).map(HeaderValue::as_bytes) != Some(b"13") {
        return Err("refused: the WebSocket version must be 13 (Sec-WebSocket-Version: 13)");
    }
    let key = headers
        .get(SEC_WEBSOCKET_KEY)
        .ok_or("refused: a WebSocket handshake needs its Sec-WebSocket-Key")?;
    HeaderValue::from_str(&derive_accept_key(key.as_bytes()))
        .map_err(|_| "refused: the Sec-WebSocket-Key cannot be answered")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handshake(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| {
                (
                    http::HeaderName::from_static(name),
                    HeaderValue::from_static(value),
                )
            })
            .collect()
    }

    #[test]
    fn the_accept_key_is_rfc_6455s() {
        let headers = handshake(&[
            ("upgrade", "websocket"),
            ("connection", "keep-alive, Upgrade"),
            ("sec-websocket-version", "13"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ]);
        // The example of RFC 6455, section 1.3.
        assert_eq!(
            accept_key(&headers).expect("a handshake"),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn each_missing_part_of_a_handshake_is_named() {
        let whole = [
            ("upgrade", "websocket"),
            ("connection", "Upgrade"),
            ("sec-websocket-version", "13"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ];
        for (left_out, named) in [
            ("upgrade", "Upgrade: websocket"),
            ("connection", "Connection: Upgrade"),
            ("sec-websocket-version", "Sec-WebSocket-Version: 13"),
            ("sec-websocket-key", "Sec-WebSocket-Key"),
        ] {
            let pairs: Vec<_> = whole
                .iter()
                .copied()
                .filter(|(name, _)| *name != left_out)
                .collect();
            let refused = accept_key(&handshake(&pairs)).expect_err(left_out);
            assert!(refused.contains(named), "{left_out}: {refused}");
        }
        let old = [
            ("upgrade", "websocket"),
            ("connection", "Upgrade"),
            ("sec-websocket-version", "8"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ];
        assert!(
            accept_key(&handshake(&old))
                .expect_err("version 8")
                .contains("13")
        );
    }
}
