//! Bearer tokens on every HTTP request: a missing, unknown, revoked or expired token is
//! answered 401 with `WWW-Authenticate` before any route runs; a valid one puts its
//! [`TokenUser`] in the request's extensions for the routes.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};

use crate::Runtime;
use crate::solution::{TokenRefusal, TokenUser};

/// Checks the request's bearer token, then runs the route as its user.
pub(super) async fn bearer(State(runtime): State<Runtime>, mut request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("bearer "))
        })
        .map(str::trim);
    let Some(token) = presented else {
        return refuse(
            "Bearer realm=\"tserver\"",
            "a bearer token is required (tserver tokens PATH create --user NAME)",
        );
    };
    match runtime.db().verify_token(token) {
        Ok(Ok(user)) => {
            request.extensions_mut().insert::<TokenUser>(user);
            next.run(request).await
        }
        Ok(Err(TokenRefusal::Expired)) => refuse(
            "Bearer realm=\"tserver\", error=\"invalid_token\", error_description=\"the token has expired\"",
            "the token has expired: create a new one",
        ),
        Ok(Err(TokenRefusal::Invalid)) => refuse(
            "Bearer realm=\"tserver\", error=\"invalid_token\"",
            "the token is not valid (unknown, revoked, or its user was removed)",
        ),
        Err(error) => {
            tracing::error!(%error, "cannot check a bearer token");
            (StatusCode::SERVICE_UNAVAILABLE, "the solution cannot be read now").into_response()
        }
    }
}

fn refuse(challenge: &'static str, message: &'static str) -> Response {
    let mut response = (StatusCode::UNAUTHORIZED, message).into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    response
}
