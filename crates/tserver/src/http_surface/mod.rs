//! The server's HTTP surface, the one place HTTP enters the server (axum): RuntimeMCP at
//! `/mcp` (the runtime tools for external AI clients, over MCP's Streamable HTTP transport).
//! Metrics, health checks and the web panel mount here later.
//!
//! Every request needs a bearer token (`tserver tokens`), checked before anything else; the
//! `Host` header must name an allowed host (default: the loopback names), against DNS
//! rebinding. Invariants: no route runs without a verified token; a token never reaches a log.

mod auth;
mod mcp;

use std::sync::Arc;

use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::Runtime;

/// The host names `Host` may carry by default (any port).
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Requests one token may make per second, by default.
pub const DEFAULT_REQUESTS_PER_SECOND: u32 = 1_000;

/// How the HTTP surface is set up.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Host names (optionally `name:port`) the `Host` header may carry.
    pub allowed_hosts: Vec<String>,
    /// Requests one token may make per second; past it, 429 with `Retry-After`.
    pub requests_per_second: u32,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            allowed_hosts: LOOPBACK_HOSTS.iter().map(|host| (*host).to_owned()).collect(),
            requests_per_second: DEFAULT_REQUESTS_PER_SECOND,
        }
    }
}

/// The routes, ready to serve.
pub fn router(runtime: &Runtime, config: &HttpConfig, shutdown: &CancellationToken) -> Router {
    let handler_runtime = runtime.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(mcp::RuntimeMcp::new(handler_runtime.clone())),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default()
            .with_allowed_hosts(config.allowed_hosts.clone())
            // A browser's request carries its page's Origin: only pages of the allowed hosts
            // may call (clients that send no Origin, as MCP clients do, are not browsers).
            .with_allowed_origins(allowed_origins(&config.allowed_hosts))
            .enforce_origin_validation()
            .with_cancellation_token(shutdown.child_token()),
    );
    Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(
            auth::Gate {
                runtime: runtime.clone(),
                budget: Arc::new(auth::RequestBudget::new(config.requests_per_second)),
            },
            auth::bearer,
        ))
}

/// The origins of pages on the allowed hosts, any port, http or https.
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
        .flat_map(|name| {
            [
                format!("http://{name}:*"),
                format!("https://{name}:*"),
                format!("http://{name}"),
                format!("https://{name}"),
            ]
        })
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
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}
