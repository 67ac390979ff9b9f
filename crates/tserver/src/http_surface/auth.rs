//! Bearer tokens on every HTTP request: a missing, unknown, revoked or expired token is
//! answered 401 with `WWW-Authenticate` before any route runs; a token past its requests per
//! second gets 429; a valid one puts its [`TokenUser`] in the request's extensions for the
//! routes.
//!
//! A verified token is remembered for [`RECHECK_AFTER`] (by the SHA-256 of its text, never the
//! text), so a client calling many times a second costs one solution read a second, not one a
//! call; a revoke or a removed user is therefore seen within that time, and an expiry exactly.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use sha2::{Digest, Sha256};

use plant::Runtime;
use store::{SolutionError, TokenRefusal, TokenUser};

/// What the middleware needs: the solution (tokens), the tokens verified lately and the
/// per-token request budget.
#[derive(Debug, Clone)]
pub(super) struct Gate {
    pub(super) runtime: Runtime,
    pub(super) verified: Arc<VerifiedTokens>,
    pub(super) budget: Arc<RequestBudget>,
}

/// How long a verified token is taken as valid without reading the solution again.
pub(super) const RECHECK_AFTER: Duration = Duration::from_secs(1);

/// Tokens verified within [`RECHECK_AFTER`], by the SHA-256 of the presented text.
#[derive(Debug, Default)]
pub(super) struct VerifiedTokens {
    entries: Mutex<HashMap<[u8; 32], (TokenUser, Instant)>>,
}

impl VerifiedTokens {
    /// The token's user, from memory while fresh, else from the solution.
    async fn verify(
        &self,
        runtime: &Runtime,
        token: &str,
    ) -> Result<Result<TokenUser, TokenRefusal>, SolutionError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        {
            let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((user, checked)) = entries.get(&key)
                && now.duration_since(*checked) < RECHECK_AFTER
            {
                if user.expires.is_some_and(|expires| expires <= SystemTime::now()) {
                    return Ok(Err(TokenRefusal::Expired));
                }
                return Ok(Ok(user.clone()));
            }
        }
        let verdict = runtime.store().verify_token(token).await?;
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        match &verdict {
            Ok(user) => {
                if entries.len() >= REMEMBERED_TOKENS {
                    entries.retain(|_, (_, checked)| now.duration_since(*checked) < RECHECK_AFTER);
                }
                entries.insert(key, (user.clone(), now));
            }
            Err(_) => {
                entries.remove(&key);
            }
        }
        Ok(verdict)
    }
}

/// Requests each token may make per second (a fixed one-second window per token).
#[derive(Debug)]
pub(super) struct RequestBudget {
    per_second: u32,
    windows: Mutex<HashMap<String, (Instant, u32)>>,
}

/// Tokens remembered before windows that have ended are dropped.
const REMEMBERED_TOKENS: usize = 10_000;

impl RequestBudget {
    pub(super) fn new(per_second: u32) -> Self {
        Self {
            per_second,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Counts one request of `token`; refused with the wait until its next window.
    fn admit(&self, token: &str, now: Instant) -> Result<(), Duration> {
        let second = Duration::from_secs(1);
        let mut windows = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        if windows.len() >= REMEMBERED_TOKENS {
            windows.retain(|_, (start, _)| now.duration_since(*start) < second);
        }
        let window = windows.entry(token.to_owned()).or_insert((now, 0));
        if now.duration_since(window.0) >= second {
            *window = (now, 0);
        }
        if window.1 >= self.per_second {
            return Err(second.saturating_sub(now.duration_since(window.0)));
        }
        window.1 += 1;
        Ok(())
    }
}

/// The token of an `Authorization` value of the Bearer scheme, whose name is case-insensitive
/// (RFC 9110 11.1): `Bearer`, `bearer` and `BEARER` alike.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Checks the request's bearer token, then runs the route as its user.
pub(super) async fn bearer(State(gate): State<Gate>, mut request: Request, next: Next) -> Response {
    let runtime = &gate.runtime;
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(bearer_token);
    let Some(token) = presented else {
        return refuse(
            "Bearer realm=\"tserver\"",
            "a bearer token is required (tserver tokens PATH create --user NAME)",
        );
    };
    match gate.verified.verify(runtime, token).await {
        Ok(Ok(user)) => {
            if let Err(wait) = gate.budget.admit(&user.token_id, Instant::now()) {
                let mut response = (
                    StatusCode::TOO_MANY_REQUESTS,
                    "this token's requests per second are used up; try again shortly",
                )
                    .into_response();
                let seconds = wait.as_secs().max(1).to_string();
                if let Ok(value) = HeaderValue::from_str(&seconds) {
                    response.headers_mut().insert(header::RETRY_AFTER, value);
                }
                return response;
            }
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
    // In the request's span, which names the client.
    tracing::debug!(reason = message, "HTTP request refused");
    let mut response = (StatusCode::UNAUTHORIZED, message).into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    response
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_bearer_scheme_is_read_whatever_its_case() {
        for value in ["Bearer tst_a", "bearer tst_a", "BEARER tst_a", "BeArEr   tst_a "] {
            assert_eq!(super::bearer_token(value), Some("tst_a"), "{value}");
        }
        for value in ["Basic dXNlcjpwdw==", "Bearertst_a", "tst_a", ""] {
            assert_eq!(super::bearer_token(value), None, "{value}");
        }
    }

    use super::*;

    #[test]
    fn a_token_gets_its_requests_per_second_and_then_waits_for_the_next_window() {
        let budget = RequestBudget::new(2);
        let start = Instant::now();
        assert_eq!(budget.admit("a", start), Ok(()));
        assert_eq!(budget.admit("a", start), Ok(()));
        assert!(budget.admit("a", start + Duration::from_millis(400)).is_err());
        assert_eq!(budget.admit("b", start), Ok(()), "another token has its own");
        assert_eq!(budget.admit("a", start + Duration::from_secs(1)), Ok(()));
    }
}
