//! Browser login: `POST /api/login` checks a user name and password (the same verifier, login
//! throttle and log lines as Hello) and answers a session cookie; `GET /api/me` says who the
//! cookie logs in; `POST /api/logout` ends it. The cookie's token lives in the store, so any
//! node sharing the solution accepts it; see `store::BrowserLogin` for its rules.
//!
//! Invariants: a POST runs only with an `Origin` of this very host (no other page can log a
//! browser in or out); the token is never logged or shown but in its `Set-Cookie`; the cookie
//! is HttpOnly and SameSite=Strict (and under TLS Secure, with the `__Host-` prefix, so no
//! other host of the domain can set it); a request carrying the cookie twice carries none.

use std::net::IpAddr;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use serde_json::json;
use tserver_proto::v1::ErrorCode;

use super::ClientAddress;
use crate::WebSocketSessions;
use crate::auth::{BROWSER_LOGINS, BrowserToken, LoginError, NO_USERS};
use plant::log_text::ClientText;

/// The cookie that carries a browser login over plain HTTP.
pub(super) const COOKIE: &str = "tserver_session";

/// The cookie that carries a browser login under TLS: the `__Host-` prefix makes the browser
/// refuse it unless Secure, Path=/ and without Domain, so a sibling host cannot plant one.
pub(super) const SECURE_COOKIE: &str = "__Host-tserver_session";

/// The cookie's name on a surface that is `secure` (HTTPS) or not.
fn cookie_name(secure: bool) -> &'static str {
    if secure { SECURE_COOKIE } else { COOKIE }
}

/// What the browser-facing routes share.
#[derive(Debug, Clone)]
pub(super) struct BrowserState {
    /// The sessions of the display server; `None` when this HTTP surface serves without one.
    pub(super) sessions: Option<WebSocketSessions>,
    /// The surface serves HTTPS: cookies are `Secure`.
    pub(super) secure: bool,
}

/// What `POST /api/login` reads.
#[derive(Debug, serde::Deserialize)]
pub(super) struct LoginRequest {
    user: String,
    password: String,
}

/// A JSON error answer: `{"error": message}`.
pub(super) fn refusal(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

/// Whether the request's `Origin` names this very host (scheme aside): present, and its
/// host and port the request's `Host`.
pub(super) fn same_origin(headers: &HeaderMap) -> bool {
    let origin = headers.get(header::ORIGIN).and_then(|value| value.to_str().ok());
    let host = headers.get(header::HOST).and_then(|value| value.to_str().ok());
    let (Some(origin), Some(host)) = (origin, host) else {
        return false;
    };
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    authority.is_some_and(|authority| authority.eq_ignore_ascii_case(host))
}

/// Refuses any request but a GET or HEAD whose `Origin` is not this host (403).
pub(super) async fn same_origin_writes(request: Request, next: Next) -> Response {
    let reads = matches!(*request.method(), Method::GET | Method::HEAD);
    if !reads && !same_origin(request.headers()) {
        return refusal(
            StatusCode::FORBIDDEN,
            "refused: the request's Origin is not this server",
        );
    }
    next.run(request).await
}

/// The browser login token the request's cookie carries (the surface's name, `secure` or not),
/// if it carries exactly one and it has the token's shape: two cookies of that name (one
/// planted by a sibling host or an older path) are ambiguous, and count as none.
pub(super) fn cookie_token(headers: &HeaderMap, secure: bool) -> Option<BrowserToken> {
    let name = cookie_name(secure);
    let mut tokens = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(found, _)| *found == name)
        .map(|(_, token)| token.trim());
    let token = tokens.next()?;
    if tokens.next().is_some() {
        return None;
    }
    (token.len() == 64 && token.bytes().all(|byte| byte.is_ascii_hexdigit()))
        .then(|| BrowserToken(token.to_owned()))
}

/// The `Set-Cookie` value that gives the browser `token` (or, with `None`, takes it away).
fn set_cookie(token: Option<&BrowserToken>, secure: bool) -> HeaderValue {
    let name = cookie_name(secure);
    let secure = if secure { "; Secure" } else { "" };
    let value = match token {
        // The browser may keep it as long as the login can last; the server ends it sooner
        // when it goes unused.
        Some(token) => format!(
            "{name}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{secure}",
            token.0,
            BROWSER_LOGINS.lifetime.as_secs()
        ),
        None => format!("{name}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{secure}"),
    };
    // Hex, digits and fixed text only.
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// 503 when this surface serves without a display server.
fn no_server() -> Response {
    refusal(
        StatusCode::SERVICE_UNAVAILABLE,
        "browser login needs the display server (tserver serve)",
    )
}

/// The request's client, as the outermost layer resolved it.
fn client(request_client: Option<axum::Extension<ClientAddress>>) -> IpAddr {
    request_client.map_or(IpAddr::from([0, 0, 0, 0]), |client| client.0.0)
}

/// `POST /api/login`.
pub(super) async fn login(
    State(state): State<BrowserState>,
    address: Option<axum::Extension<ClientAddress>>,
    body: Result<Json<LoginRequest>, JsonRejection>,
) -> Response {
    let Some(sessions) = &state.sessions else {
        return no_server();
    };
    let Json(request) = match body {
        Ok(body) => body,
        Err(rejection) => {
            let message = format!(
                "the body must be JSON {{\"user\": ..., \"password\": ...}}: {}",
                rejection.body_text()
            );
            return refusal(StatusCode::BAD_REQUEST, &message);
        }
    };
    let peer = client(address);
    let auth = sessions.auth();
    let verified = auth.verify(peer, &request.user, &request.password).await;
    let login = match verified {
        Ok(login) => login,
        Err(error) => {
            crate::telemetry::count_login(Some(match error {
                LoginError::Throttled(_) => ErrorCode::LoginThrottled,
                _ => ErrorCode::LoginFailed,
            }));
            return login_refusal(error);
        }
    };
    let token = match auth.start_browser_login(&login).await {
        Ok(token) => token,
        Err(error) => return login_refusal(error),
    };
    crate::telemetry::count_login(None);
    tracing::info!(user = %ClientText(&login.name), %peer, client = "browser", "logged in");
    let mut response = Json(json!({ "user": &*login.name, "role": login.role.as_str() })).into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, set_cookie(Some(&token), state.secure));
    response
}

/// The answer to a refused login.
fn login_refusal(error: LoginError) -> Response {
    match error {
        LoginError::Refused => refusal(StatusCode::UNAUTHORIZED, "unknown user or wrong password"),
        LoginError::NoUsers => refusal(StatusCode::UNAUTHORIZED, NO_USERS),
        LoginError::Throttled(wait) => {
            let seconds = wait.as_secs_f64().ceil();
            let message = format!("too many failed logins from this address; try again in {seconds} s");
            let mut response = refusal(StatusCode::TOO_MANY_REQUESTS, &message);
            if let Ok(value) = HeaderValue::from_str(&format!("{seconds}")) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            response
        }
        LoginError::Internal(reason) => {
            tracing::error!(%reason, "browser login check failed");
            refusal(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the login could not be checked; see the server log",
            )
        }
    }
}

/// `GET /api/me`: who the cookie logs in. Without a cookie the answer is 204 (nobody logs in
/// from this browser: a first visit, not a refusal, so the panel's first load fails nothing);
/// a cookie that no longer logs in is refused (401).
pub(super) async fn me(State(state): State<BrowserState>, headers: HeaderMap) -> Response {
    let Some(sessions) = &state.sessions else {
        return no_server();
    };
    let Some(token) = cookie_token(&headers, state.secure) else {
        return StatusCode::NO_CONTENT.into_response();
    };
    match sessions.auth().browser_login(&token).await {
        Ok(Some(login)) => Json(json!({ "user": login.user, "role": login.role.as_str() })).into_response(),
        Ok(None) => refusal(
            StatusCode::UNAUTHORIZED,
            "not logged in (the login expired or was ended)",
        ),
        Err(error) => login_refusal(error),
    }
}

/// `POST /api/logout`: ends the cookie's login and takes the cookie away.
pub(super) async fn logout(State(state): State<BrowserState>, headers: HeaderMap) -> Response {
    let Some(sessions) = &state.sessions else {
        return no_server();
    };
    if let Some(token) = cookie_token(&headers, state.secure)
        && let Err(error) = sessions.auth().end_browser_login(&token).await
    {
        return login_refusal(error);
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, set_cookie(None, state.secure));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                name.clone(),
                HeaderValue::from_str(value).expect("a header value"),
            );
        }
        headers
    }

    #[test]
    fn only_an_origin_of_this_host_and_port_is_the_same_origin() {
        let host = (header::HOST, "127.0.0.1:8080");
        assert!(same_origin(&headers(&[
            host.clone(),
            (header::ORIGIN, "http://127.0.0.1:8080")
        ])));
        assert!(same_origin(&headers(&[
            host.clone(),
            (header::ORIGIN, "https://127.0.0.1:8080")
        ])));
        assert!(!same_origin(&headers(&[
            host.clone(),
            (header::ORIGIN, "http://127.0.0.1:8081")
        ])));
        assert!(!same_origin(&headers(&[
            host.clone(),
            (header::ORIGIN, "http://evil.example")
        ])));
        assert!(!same_origin(&headers(&[host.clone(), (header::ORIGIN, "null")])));
        assert!(!same_origin(&headers(&[host])));
    }

    #[test]
    fn the_cookie_token_is_found_among_others_and_must_have_its_shape() {
        let token = "ab".repeat(32);
        let found = cookie_token(
            &headers(&[(header::COOKIE, &format!("theme=dark; {COOKIE}={token}; other=1"))]),
            false,
        );
        assert_eq!(found, Some(BrowserToken(token.clone())));
        let short = cookie_token(&headers(&[(header::COOKIE, &format!("{COOKIE}=abc"))]), false);
        assert_eq!(short, None);
        // Twice, in one header or two: ambiguous, so none.
        let other = "ef".repeat(32);
        let twice = cookie_token(
            &headers(&[(header::COOKIE, &format!("{COOKIE}={token}; {COOKIE}={other}"))]),
            false,
        );
        assert_eq!(twice, None);
        let in_two = cookie_token(
            &headers(&[
                (header::COOKIE, &format!("{COOKIE}={token}")),
                (header::COOKIE, &format!("{COOKIE}={other}")),
            ]),
            false,
        );
        assert_eq!(in_two, None);
        // Under TLS only the `__Host-` cookie counts.
        let plain_under_tls = cookie_token(&headers(&[(header::COOKIE, &format!("{COOKIE}={token}"))]), true);
        assert_eq!(plain_under_tls, None);
        let host_prefixed = cookie_token(
            &headers(&[(header::COOKIE, &format!("{SECURE_COOKIE}={token}"))]),
            true,
        );
        assert_eq!(host_prefixed, Some(BrowserToken(token)));
    }

    #[test]
    fn the_cookie_is_http_only_strict_and_secure_only_under_tls() {
        let token = BrowserToken("cd".repeat(32));
        let plain = set_cookie(Some(&token), false);
        let plain = plain.to_str().expect("ASCII");
        assert!(
            plain.starts_with(&format!(
                "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
                token.0
            )),
            "{plain}"
        );
        assert!(!plain.contains("Secure"), "{plain}");
        let tls = set_cookie(Some(&token), true);
        let tls = tls.to_str().expect("ASCII");
        assert!(
            tls.starts_with("__Host-tserver_session=")
                && tls.contains("; Path=/")
                && tls.ends_with("; Secure"),
            "{tls}"
        );
        assert!(!tls.contains("Domain"), "{tls}");
        let cleared = set_cookie(None, true);
        let cleared = cleared.to_str().expect("ASCII");
        assert!(
            cleared.contains("Max-Age=0") && !cleared.contains(&token.0),
            "{cleared}"
        );
    }
}
