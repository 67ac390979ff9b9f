//! The server's HTTP surface, the one place HTTP enters the server (axum): RuntimeMCP at
//! `/mcp` (the runtime tools for external AI clients, over MCP's Streamable HTTP transport),
//! `/metrics` for Prometheus, and `/healthz` and `/readyz` for load balancers. The web panel
//! mounts here later.
//!
//! Every request but the health checks needs a bearer token (`tserver tokens`), checked before
//! anything else; MCP's `Host` header must name an allowed host (default: the loopback names),
//! against DNS rebinding. With the TCP listener's certificate it serves HTTPS only.
//! Invariants: no route but the health checks runs without a verified token (they read
//! nothing of the plant); a token never reaches a log; MCP sessions never exceed their cap.

mod auth;
mod health;
mod mcp;
mod sessions;
mod tls;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::serve::ListenerExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tserver_proto::rustls;

use crate::Runtime;

/// The host names `Host` may carry by default (any port).
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Requests one token may make per second, by default.
pub const DEFAULT_REQUESTS_PER_SECOND: u32 = 1_000;

/// MCP sessions open at once, by default.
pub const DEFAULT_MAX_SESSIONS: usize = 256;

/// How long an MCP session may sit idle before it ends, by default (rmcp's own default).
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(300);

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
    /// Serve HTTPS with this configuration (the TCP listener's certificate), else plain HTTP.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Whether the TCP listener accepts, for `/readyz` (never ready without one).
    pub accepting: Option<crate::Accepting>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            allowed_hosts: LOOPBACK_HOSTS.iter().map(|host| (*host).to_owned()).collect(),
            requests_per_second: DEFAULT_REQUESTS_PER_SECOND,
            max_sessions: DEFAULT_MAX_SESSIONS,
            session_idle: DEFAULT_SESSION_IDLE,
            tls: None,
            accepting: None,
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
    let cap = Arc::new(sessions::SessionCap::new(
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
    // Layers wrap what is above them: the token is checked first, then the session cap.
    Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(cap, sessions::cap_sessions))
        .route("/metrics", axum::routing::get(metrics_text))
        .layer(axum::middleware::from_fn_with_state(
            auth::Gate {
                runtime: runtime.clone(),
                verified: Arc::default(),
                budget: Arc::new(auth::RequestBudget::new(config.requests_per_second)),
            },
            auth::bearer,
        ))
        // Merged after the layers above, so no token is asked of a load balancer's probe.
        .merge(health::routes(runtime.clone(), config.accepting.clone()))
}

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
pub async fn serve(
    listener: TcpListener,
    runtime: Runtime,
    config: HttpConfig,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let app = router(&runtime, &config, &shutdown);
    match &config.tls {
        Some(tls) => {
            let listener = tls::TlsListener::new(listener, tls, shutdown.clone())?;
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown.cancelled_owned())
                .await
        }
        None => {
            // Small JSON-RPC answers must not wait for Nagle's algorithm.
            let listener = listener.tap_io(|socket| {
                if let Err(error) = socket.set_nodelay(true) {
                    tracing::debug!(%error, "cannot set TCP_NODELAY");
                }
            });
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown.cancelled_owned())
                .await
        }
    }
}
