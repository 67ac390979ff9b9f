//! The server's HTTP surface, the one place HTTP enters the server (axum): RuntimeMCP at
//! `/mcp` (the runtime tools for external AI clients, over MCP's Streamable HTTP transport),
//! `/metrics` for Prometheus, `/healthz` and `/readyz` for load balancers, and for browsers the
//! operator panel (`/`, `/panel/*`), its login (`/api/login`, `/api/me`, `/api/logout`) and
//! the WebSocket transport of the display protocol (`/ws`, `websocket.rs`).
//!
//! Every request to `/mcp` and `/metrics` needs a bearer token (`tserver tokens`), checked before
//! anything else; the browser routes take a password once and then a session cookie, and accept
//! writes and WebSocket upgrades only from a page of this very host. Against DNS rebinding, the
//! `Host` of MCP and browser requests must name a host the server is reached by (the loopback
//! names, its bound address, `--http-allow-host`; `hosts.rs`). With the TCP listener's certificate it serves HTTPS only.
//! Connections are capped, and headers, bodies and idle keep-alives timed out
//! (`connections.rs`, `body.rs`), so the HTTP port can never take the file descriptors the
//! framed port and the health checks need.
//! Invariants: no route but the health checks and the browser routes runs without a verified
//! token (the health checks read nothing of the plant; the browser routes read it only through
//! a logged-in session); neither a token nor a session id reaches a log; an MCP session
//! answers only the token that opened it; MCP sessions never exceed their cap; HTTP
//! connections never exceed their cap and its overflow allowance.

mod auth;
mod body;
mod browser_login;
mod connections;
mod health;
mod hosts;
mod mcp;
pub(crate) mod panel;
mod sessions;
mod tls;
mod websocket;

pub use connections::OVERFLOW_CONNECTIONS;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tserver_tls::rustls;

use plant::Runtime;

/// The host names `Host` may carry by default (any port).
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Requests one token may make per second, by default.
pub const DEFAULT_REQUESTS_PER_SECOND: u32 = 1_000;

/// MCP sessions open at once, by default.
pub const DEFAULT_MAX_SESSIONS: usize = 256;

/// How long an MCP session may sit idle before it ends, by default (rmcp's own default).
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(300);

/// HTTP connections open at once, by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// How long a request's head may take to arrive, by default (also the longest idle
/// keep-alive and the TLS handshake's limit).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a request's whole body may take to arrive, by default.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest request body (MCP's own limit, rmcp's).
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The largest body of a browser request (`/api/login`, `/api/logout`), read before anyone is
/// known: a login is a few hundred bytes.
pub const MAX_BROWSER_BODY_BYTES: usize = 4 * 1024;

/// How the HTTP surface is set up.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Host names (optionally `name:port`) the `Host` header may carry.
    pub allowed_hosts: Vec<String>,
    /// Requests one token may make per second; past it, 429 with `Retry-After`.
    pub requests_per_second: u32,
    /// MCP sessions open at once; past it, a new one gets 503 with `Retry-After`.
    pub max_sessions: usize,
    /// How long an MCP session may sit idle; then it ends and its id gets 404.
    pub session_idle: Duration,
    /// HTTP connections at once; past it, an idle one is closed for the newcomer, or, when
    /// every one answers a request, the newcomer gets the health checks and 503 for the rest.
    pub max_connections: usize,
    /// How long a request's head may take to arrive (from the connection's start or the end of
    /// the previous response, so also the longest idle keep-alive, and the TLS handshake's).
    pub header_timeout: Duration,
    /// How long a request's whole body may take to arrive (then 408 and the connection closes).
    pub body_timeout: Duration,
    /// Serve HTTPS with this configuration (the TCP listener's certificate), else plain HTTP.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Whether the TCP listener accepts, for `/readyz` (never ready without one).
    pub accepting: Option<crate::Accepting>,
    /// Reverse proxies whose `Forwarded` / `X-Forwarded-For` name the client (for the logs);
    /// from anyone else those headers are ignored.
    pub trusted_proxies: crate::proxy::TrustedProxies,
    /// The display server's sessions, which `/ws` joins and the browser login checks against;
    /// without them those routes answer 503.
    pub sessions: Option<crate::WebSocketSessions>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            allowed_hosts: LOOPBACK_HOSTS.iter().map(|host| (*host).to_owned()).collect(),
            requests_per_second: DEFAULT_REQUESTS_PER_SECOND,
            max_sessions: DEFAULT_MAX_SESSIONS,
            session_idle: DEFAULT_SESSION_IDLE,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            tls: None,
            accepting: None,
            trusted_proxies: crate::proxy::TrustedProxies::default(),
            sessions: None,
        }
    }
}

/// The routes, ready to serve.
pub fn router(runtime: &Runtime, config: &HttpConfig, shutdown: &CancellationToken) -> Router {
    let handler_runtime = runtime.clone();
    let mut session_manager = LocalSessionManager::default();
    session_manager.session_config.keep_alive = Some(config.session_idle);
    session_manager.session_config.sse_retry = None;
    let session_manager = Arc::new(session_manager);
    let sessions = Arc::new(sessions::Sessions::new(
        Arc::clone(&session_manager),
        config.max_sessions,
    ));
    let mcp = StreamableHttpService::new(
        move || Ok(mcp::RuntimeMcp::new(handler_runtime.clone())),
        session_manager,
        StreamableHttpServerConfig::default()
            .with_allowed_hosts(config.allowed_hosts.clone())
            // A browser's request carries its page's Origin: only pages of the allowed hosts
            // may call (clients that send no Origin, as MCP clients do, are not browsers).
            .with_allowed_origins(allowed_origins(&config.allowed_hosts))
            .enforce_origin_validation()
            .with_sse_retry(None)
            .with_cancellation_token(shutdown.child_token()),
    );
    let body = body::BodyLimits {
        deadline: config.body_timeout,
        max_bytes: MAX_BODY_BYTES,
    };
    // Layers wrap what is above them: the token is checked first (before any body is read, so
    // no one without a token makes the server hold a body), then the body is read within its
    // deadline, then the session rules (cap, owner, request ids in flight).
    Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(
            sessions,
            sessions::guard_sessions,
        ))
        .route("/metrics", axum::routing::get(metrics_text))
        .layer(axum::middleware::from_fn_with_state(body, body::read_body))
        .layer(axum::middleware::from_fn_with_state(
            auth::Gate {
                runtime: runtime.clone(),
                verified: Arc::default(),
                budget: Arc::new(auth::RequestBudget::new(config.requests_per_second)),
            },
            auth::bearer,
        ))
        // Merged after the layers above, so no token is asked of a load balancer's probe, nor
        // of a browser (it logs in with a user's password and holds a cookie instead).
        .merge(health::routes(runtime.clone(), config.accepting.clone()))
        .merge(browser_routes(config, body))
        // Outermost: every request's log lines name its client.
        .layer(axum::middleware::from_fn_with_state(
            config.trusted_proxies.clone(),
            client_address,
        ))
}

/// The panel, the browser login and the WebSocket: no bearer token (a browser logs in with a
/// password and holds a cookie); only for a `Host` this server is reached by, and writes and
/// upgrades only from a page of that host.
fn browser_routes(config: &HttpConfig, body: body::BodyLimits) -> Router {
    use axum::routing::{get, post};
    let state = browser_login::BrowserState {
        sessions: config.sessions.clone(),
        secure: config.tls.is_some(),
    };
    Router::new()
        .route("/api/login", post(browser_login::login))
        .route("/api/me", get(browser_login::me))
        .route("/api/logout", post(browser_login::logout))
        .layer(axum::middleware::from_fn_with_state(
            body::BodyLimits {
                max_bytes: MAX_BROWSER_BODY_BYTES,
                ..body
            },
            body::read_body,
        ))
        .layer(axum::middleware::from_fn(browser_login::same_origin_writes))
        .route("/ws", get(websocket::upgrade))
        .with_state(state)
        .merge(panel::routes())
        // Outermost of the browser routes: a rebound name never reaches a page, a login or
        // a WebSocket.
        .layer(axum::middleware::from_fn_with_state(
            hosts::AllowedHosts::new(&config.allowed_hosts),
            hosts::known_host,
        ))
}

/// The client of a request: its peer, or behind a trusted reverse proxy the address the proxy
/// forwards for. In the request's extensions ([`ClientAddress`]) and the span of its log lines.
async fn client_address(
    axum::extract::State(trusted): axum::extract::State<crate::proxy::TrustedProxies>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use tracing::Instrument;
    let peer = request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|info| info.0.ip());
    let Some(peer) = peer else {
        return next.run(request).await;
    };
    let client = crate::proxy::forwarded_client(&trusted, peer, request.headers());
    request.extensions_mut().insert(ClientAddress(client));
    next.run(request)
        .instrument(tracing::info_span!("http", %client))
        .await
}

/// The client's address of an HTTP request (see `client_address`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddress(pub std::net::IpAddr);

/// `/metrics`: every metric in Prometheus's text format (any valid token may scrape); 404
/// from a server started with `--metrics off`.
async fn metrics_text() -> axum::response::Response {
    use axum::response::IntoResponse;
    match crate::telemetry::render() {
        Some(text) => (
            [(
                http::header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        None => (
            http::StatusCode::NOT_FOUND,
            "metrics are off on this server (tserver serve --metrics off)\n",
        )
            .into_response(),
    }
}

/// The origins of pages on the allowed hosts, any port (the scheme's default included), http or
/// https. Only `:*` entries: rmcp warns at every start about an entry without a port, whose
/// "any port" meaning it is changing to "the default port".
fn allowed_origins(hosts: &[String]) -> Vec<String> {
    hosts
        .iter()
        .map(|host| {
            host.rsplit_once(':')
                .filter(|_| !host.contains("::"))
                .map_or(host.as_str(), |(name, _)| name)
        })
        .map(|name| {
            if name.contains(':') {
                format!("[{name}]")
            } else {
                name.to_owned()
            }
        })
        .flat_map(|name| [format!("http://{name}:*"), format!("https://{name}:*")])
        .collect()
}

/// Serves the HTTP surface on `listener` until `shutdown`.
#[crate::compiled_once]
pub async fn serve(
    listener: TcpListener,
    runtime: Runtime,
    mut config: HttpConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    if config.max_connections == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the HTTP connection cap must be at least 1",
        ));
    }
    // The address it listens on is a name it is reached by; a wildcard is not, so a server on
    // every interface answers at the names it is given (`--http-allow-host`) and loopback.
    let bound = listener.local_addr()?.ip();
    if bound.is_unspecified() {
        tracing::info!(
            allowed = ?config.allowed_hosts,
            "the HTTP surface listens on every interface: browsers and MCP clients are served at              these host names only (add others with --http-allow-host NAME)"
        );
    } else {
        config.allowed_hosts.push(bound.to_string());
    }
    let app = router(&runtime, &config, &shutdown);
    let max_connections = config.max_connections;
    // Past the cap: the health checks still answer; anything else is told to come back.
    let overflow = health::routes(runtime.clone(), config.accepting.clone())
        .fallback(move || async move { connections::at_the_cap(max_connections) });
    let limits = connections::ConnectionLimits {
        max_connections,
        header_timeout: config.header_timeout,
    };
    let tls = config.tls.as_ref().map(tls::http_config);
    connections::serve(listener, app, overflow, tls, limits, shutdown).await;
    Ok(())
}
