//! A request's body, read whole within a total deadline and a size limit before any route
//! sees it: a client trickling its body (one byte a second) is answered 408 and closed when the
//! deadline passes, however steadily the bytes come, and a body past the limit is answered 413
//! (at once when `Content-Length` says so).

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use http_body_util::{BodyExt, LengthLimitError, Limited};

/// How a body must arrive.
#[derive(Debug, Clone, Copy)]
pub(super) struct BodyLimits {
    /// The whole body must have arrived within this time of the request's head.
    pub(super) deadline: Duration,
    /// The largest body, in bytes.
    pub(super) max_bytes: usize,
}

/// Reads the body within `limits`, then runs the route with it in memory.
pub(super) async fn read_body(State(limits): State<BodyLimits>, request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limits.max_bytes as u64) {
        return too_large(limits.max_bytes);
    }
    let (parts, body) = request.into_parts();
    let read = tokio::time::timeout(limits.deadline, Limited::new(body, limits.max_bytes).collect());
    match read.await {
        Ok(Ok(collected)) => {
            next.run(Request::from_parts(parts, Body::from(collected.to_bytes())))
                .await
        }
        Ok(Err(error)) if error.is::<LengthLimitError>() => too_large(limits.max_bytes),
        Ok(Err(error)) => {
            tracing::debug!(%error, "an HTTP request body could not be read");
            closing(
                StatusCode::BAD_REQUEST,
                "the request body could not be read".to_owned(),
            )
        }
        Err(_) => closing(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive within {} s (--http-body-timeout-secs)",
                limits.deadline.as_secs_f64()
            ),
        ),
    }
}

fn too_large(max_bytes: usize) -> Response {
    closing(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("a request body may have at most {max_bytes} bytes"),
    )
}

/// A refusal after which the connection closes: the rest of the body is not read.
fn closing(status: StatusCode, message: String) -> Response {
    let mut response = (status, message).into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
