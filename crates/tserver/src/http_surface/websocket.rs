//! `GET /ws`: the WebSocket transport. A same-origin upgrade only (403 otherwise, before any
//! upgrade), a slot and a waiting-room seat of the display server taken before upgrading (503
//! when none is free), messages bounded by the frame limit, then the same session the TCP
//! listener runs, for the request's real client address, with the browser login of the
//! request's cookie (if any) for its Hello.

use std::net::SocketAddr;

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{ConnectInfo, State};
use axum::response::Response;
use http::{HeaderMap, StatusCode};

use super::ClientAddress;
use super::browser_login::{BrowserState, cookie_token, refusal, same_origin};

/// The first size of a WebSocket's read buffer.
const READ_BUFFER: usize = 4 * 1024;

/// `GET /ws`.
pub(super) async fn upgrade(
    State(state): State<BrowserState>,
    connected: Option<axum::Extension<ConnectInfo<SocketAddr>>>,
    address: Option<axum::Extension<ClientAddress>>,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    if !same_origin(&headers) {
        return refusal(
            StatusCode::FORBIDDEN,
            "refused: a WebSocket is opened only by a page of this server (Origin must equal Host)",
        );
    }
    let Some(sessions) = &state.sessions else {
        return refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "the WebSocket needs the display server (tserver serve)",
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
    let browser = cookie_token(&headers, state.secure);
    // The socket's own bound is twice the limit, so a message just past the limit is still
    // read whole and refused with its reason (FRAME_TOO_LARGE) before the close; one past the
    // bound is refused as soon as its header shows its length.
    let bound = sessions.max_message().saturating_mul(2);
    upgrade
        // Most WebSockets sit idle between small messages: the read buffer starts small (the
        // library's default takes 128 KiB per socket at once) and grows only for a large one.
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(0)
        .max_message_size(bound)
        .max_frame_size(bound)
        .on_upgrade(move |socket| admission.serve(socket, peer, browser))
}
