//! `tserver serve`: its options, the open-file check, and serving a solution on the framed
//! port (and the HTTP surface when asked) until shutdown.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::solution::SolutionArg;
use crate::{Server, ServerConfig};
use plant::Runtime;
use store::{ServeLock, SolutionError, SolutionLocation};

/// Options of `tserver serve`; every limit defaults to the value in `docs/LIMITS.md`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The solution to serve, first or as `--solution`: a file, or a `postgres://` URL shared
    /// by several nodes (its password from the URL, PGPASSWORD or ~/.pgpass; secrets' key from
    /// TSERVER_SECRETS_KEY).
    #[command(flatten)]
    pub solution: SolutionArg,
    /// Also serve HTTP on this address: the operator panel at / with its browser login, the
    /// display protocol over a WebSocket at /ws, and RuntimeMCP at /mcp for external AI
    /// clients (bearer tokens from `tserver tokens`). Off by default. With --tls-cert it serves HTTPS only,
    /// with the same certificate.
    #[arg(long)]
    pub http: Option<SocketAddr>,
    /// A host name the HTTP surface answers to beside the loopback names (its `Host` header
    /// is checked, against DNS rebinding); repeat for several.
    #[arg(long = "http-allow-host")]
    pub http_allow_hosts: Vec<String>,
    /// Requests one API token may make per second on the HTTP surface (then 429).
    #[arg(long, default_value_t = crate::http_surface::DEFAULT_REQUESTS_PER_SECOND)]
    pub http_requests_per_second: u32,
    /// MCP sessions open at once on the HTTP surface (then 503 until one closes).
    #[arg(long, default_value_t = crate::http_surface::DEFAULT_MAX_SESSIONS)]
    pub http_max_sessions: usize,
    /// Seconds an MCP session may sit idle before it ends (its client then initializes again).
    #[arg(long, default_value_t = crate::http_surface::DEFAULT_SESSION_IDLE.as_secs_f64())]
    pub http_session_idle_secs: f64,
    /// HTTP connections open at once, apart from --max-connections (the framed port's). Past
    /// it an idle connection is closed for the newcomer; when every one is answering a request,
    /// a few more get the health checks and 503 for the rest. Each is a file descriptor: both
    /// caps and a reserve must fit the open-file limit, or serve refuses to start.
    #[arg(long, default_value_t = crate::http_surface::DEFAULT_MAX_CONNECTIONS)]
    pub http_max_connections: usize,
    /// Seconds a request's head may take to arrive on the HTTP surface (from the connection's
    /// start or the previous response's end, so also the longest idle keep-alive).
    #[arg(long, default_value_t = crate::http_surface::DEFAULT_HEADER_TIMEOUT.as_secs_f64())]
    pub http_header_timeout_secs: f64,
    /// Seconds a request's whole body may take to arrive on the HTTP surface (then 408).
    #[arg(long, default_value_t = crate::http_surface::DEFAULT_BODY_TIMEOUT.as_secs_f64())]
    pub http_body_timeout_secs: f64,
    /// A proxy (CIDR or address; repeat for several) whose word on the client's address is
    /// believed: on the framed port its connections must start with a PROXY protocol header
    /// (v1 or v2; HAProxy's send-proxy-v2) naming the client, which the login throttle, logs and
    /// audit then use; on the HTTP surface its `Forwarded` / `X-Forwarded-For` name the client
    /// in the logs. A PROXY header from any other address closes its connection.
    #[arg(long = "trusted-proxy", value_name = "CIDR")]
    pub trusted_proxies: Vec<crate::proxy::TrustedNetwork>,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:3101")]
    pub listen: SocketAddr,
    /// Connections served at once.
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    /// Largest protobuf body of one frame, in bytes.
    #[arg(long, default_value_t = tserver_proto::DEFAULT_MAX_FRAME)]
    pub max_frame_bytes: usize,
    /// Connections not yet logged in, at once.
    #[arg(long, default_value_t = 256)]
    pub max_unauthenticated: usize,
    /// Of --max-connections, how many WebSockets (browsers at /ws) may hold; the rest stay for
    /// TCP display clients. Default: half of --max-connections.
    #[arg(long)]
    pub max_websockets: Option<usize>,
    /// WebSockets from one client address.
    #[arg(long, default_value_t = 64)]
    pub max_websockets_per_address: usize,
    /// WebSockets logged in as one user.
    #[arg(long, default_value_t = 128)]
    pub max_websockets_per_user: usize,
    /// Unanswered calls per connection.
    #[arg(long, default_value_t = 32)]
    pub max_calls_in_flight: usize,
    /// Seconds a new connection has to log in.
    #[arg(long, default_value_t = 5.0)]
    pub login_timeout_secs: f64,
    /// Seconds of silence after which a connection is closed.
    #[arg(long, default_value_t = 300.0)]
    pub idle_timeout_secs: f64,
    /// Seconds shutdown waits for calls in flight.
    #[arg(long, default_value_t = 10.0)]
    pub shutdown_grace_secs: f64,
    /// History bytes one connection's chat transcript keeps.
    #[arg(long, default_value_t = localai::TranscriptBudget::default().session_bytes)]
    pub transcript_session_bytes: usize,
    /// History bytes all chat transcripts keep together.
    #[arg(long, default_value_t = localai::TranscriptBudget::default().cache_bytes)]
    pub transcript_cache_bytes: usize,
    /// Serve TLS only, with this PEM certificate chain (needs --tls-key).
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Run the plant simulator (`on`/`off`); default: the solution's `SimulatorEnabled`
    /// setting (on in demo solutions).
    #[arg(long, value_name = "on|off", value_parser = parse_switch)]
    pub simulator: Option<bool>,
    /// Record metrics for `/metrics` on the HTTP surface (`on`/`off`). Off, nothing is
    /// recorded and `/metrics` answers 404.
    #[arg(long, value_name = "on|off", value_parser = parse_switch, default_value = "on", action = clap::ArgAction::Set)]
    pub metrics: bool,
}

pub(crate) fn parse_switch(text: &str) -> Result<bool, String> {
    store::parse_bool(text).ok_or_else(|| format!("{text:?} is not on or off"))
}

impl ServeArgs {
    /// `--trusted-proxy`, as one list.
    pub fn trusted_proxies(&self) -> crate::proxy::TrustedProxies {
        crate::proxy::TrustedProxies::new(self.trusted_proxies.iter().map(|network| network.0).collect())
    }

    /// The server limits these options describe.
    pub fn config(&self) -> anyhow::Result<ServerConfig> {
        Ok(ServerConfig::default()
            .with_trusted_proxies(self.trusted_proxies())
            .with_metrics(self.metrics)
            .with_max_connections(self.max_connections)
            .with_max_unauthenticated(self.max_unauthenticated)
            .with_websocket_limits(crate::WebSocketLimits {
                total: self
                    .max_websockets
                    .unwrap_or(crate::WebSocketLimits::for_connections(self.max_connections).total),
                per_address: self.max_websockets_per_address,
                per_user: self.max_websockets_per_user,
            })
            .with_max_frame(self.max_frame_bytes)
            .with_max_calls_in_flight(self.max_calls_in_flight)
            .with_login_timeout(seconds("--login-timeout-secs", self.login_timeout_secs)?)
            .with_idle_timeout(seconds("--idle-timeout-secs", self.idle_timeout_secs)?)
            .with_shutdown_grace(seconds("--shutdown-grace-secs", self.shutdown_grace_secs)?)
            .with_transcript_budget(localai::TranscriptBudget {
                session_bytes: self.transcript_session_bytes,
                cache_bytes: self.transcript_cache_bytes,
            }))
    }
}

fn seconds(option: &str, value: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|duration| !duration.is_zero())
        .with_context(|| format!("{option} must be a positive number of seconds, not {value}"))
}

/// File descriptors kept apart from both ports' connections: the framed port's refusals being
/// written (at most 64), the solution's files, the listeners, MQTT sources, model servers, a
/// database pool and logs.
pub const RESERVED_OPEN_FILES: u64 = 256;

/// Every connection is a file descriptor. The default soft limit (often 1024) would refuse
/// connections long before the caps, so take what the hard limit allows; then both ports'
/// caps and the reserve must fit, or a flood on one port could starve the other (accept
/// failing with "Too many open files"), so serve refuses to start and says what to change.
fn check_open_files(args: &ServeArgs) -> anyhow::Result<()> {
    let Ok(open_files) = rlimit::increase_nofile_limit(u64::MAX) else {
        return Ok(());
    };
    let http = if args.http.is_some() {
        (args.http_max_connections as u64).saturating_add(crate::http_surface::OVERFLOW_CONNECTIONS as u64)
    } else {
        0
    };
    let needed = (args.max_connections as u64)
        .saturating_add(http)
        .saturating_add(RESERVED_OPEN_FILES);
    if needed > open_files {
        let http = if args.http.is_some() {
            format!(
                " + --http-max-connections {} + {} for health checks past it",
                args.http_max_connections,
                crate::http_surface::OVERFLOW_CONNECTIONS
            )
        } else {
            String::new()
        };
        bail!(
            "the open-file limit is {open_files}, too low for the connection caps: \
             --max-connections {}{http} + {RESERVED_OPEN_FILES} kept for the solution, sources \
             and models = {needed}. Raise the limit (`ulimit -n {needed}` in the shell that \
             starts tserver, `LimitNOFILE={needed}` in its systemd unit) or lower the caps",
            args.max_connections
        );
    }
    Ok(())
}

/// Runs `serve` until `shutdown` is cancelled.
#[crate::compiled_once]
pub async fn serve(args: &ServeArgs, shutdown: CancellationToken) -> anyhow::Result<()> {
    let listener = crate::listen(args.listen).with_context(|| format!("cannot listen on {}", args.listen))?;
    serve_on(args, listener, shutdown).await
}

/// Runs `serve` on a listener the caller bound (tests bind `127.0.0.1:0`); `--listen` is not
/// used.
#[crate::compiled_once]
pub async fn serve_on(
    args: &ServeArgs,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let config = args.config()?;
    // Certificates are checked before anything starts, so a bad file is a clear start error.
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tserver_tls::server_config(cert, key).context("cannot set up TLS")?),
        _ => None,
    };
    check_open_files(args)?;
    // One server per solution: a second would double the history and race the first.
    let listen = listener
        .local_addr()
        .map_or_else(|_| args.listen.to_string(), |address| address.to_string());
    // A database is shared by design; a file is served by one server only.
    let solution = args.solution.location()?;
    let _lock = match solution {
        SolutionLocation::File(path) => {
            if !path.exists() {
                return Err(SolutionError::NotFound(path.clone()).into());
            }
            Some(ServeLock::acquire(path, &listen)?)
        }
        SolutionLocation::Postgres(_) => None,
    };
    let runtime = Runtime::open_at(solution)
        .await
        .with_context(|| format!("cannot open solution {solution}"))?;
    let simulate = args.simulator.unwrap_or(runtime.settings().simulator_enabled);
    tracing::info!(
        tags = runtime.objects().len(),
        alarms = runtime.objects().alarms().len(),
        simulator = simulate,
        "solution loaded"
    );
    // What a newcomer's server does not do yet, and the command that changes it (both are
    // followed live, so no restart is needed).
    let at = shlex::try_quote(&solution.to_string())
        .map_or_else(|_| solution.to_string(), |quoted| quoted.into_owned());
    if args.simulator.is_none() && !simulate && !runtime.simulator().motions().is_empty() {
        tracing::info!(
            "the simulator is off, so simulated tags keep their values: `tserver settings {at} set SimulatorEnabled on` starts it"
        );
    }
    if let Ok(row) = runtime.store().settings_row().await
        && !row.model_enabled
    {
        tracing::info!(
            "Local AI is off, so chat answers `disabled`: `tserver settings {at} set ModelEnabled true` turns it on"
        );
    }
    let grace = config.shutdown_grace;
    let mut server = Server::new(runtime.clone(), config)?;
    let live = LivePlant::start(&runtime, args.simulator, &shutdown).await?;
    if let Some(address) = args.http {
        let listener =
            crate::listen(address).with_context(|| format!("cannot listen for HTTP on {address}"))?;
        let mut http = crate::http_surface::HttpConfig::default();
        http.allowed_hosts.extend(args.http_allow_hosts.iter().cloned());

        http.requests_per_second = args.http_requests_per_second;
        anyhow::ensure!(
            args.http_max_sessions > 0,
            "--http-max-sessions must be at least 1"
        );
        http.max_sessions = args.http_max_sessions;
        http.session_idle = seconds("--http-session-idle-secs", args.http_session_idle_secs)?;
        anyhow::ensure!(
            args.http_max_connections > 0,
            "--http-max-connections must be at least 1"
        );
        http.max_connections = args.http_max_connections;
        http.header_timeout = seconds("--http-header-timeout-secs", args.http_header_timeout_secs)?;
        http.body_timeout = seconds("--http-body-timeout-secs", args.http_body_timeout_secs)?;
        http.tls.clone_from(&tls);
        http.accepting = Some(server.accepting());
        http.trusted_proxies = args.trusted_proxies();
        http.sessions = Some(server.websocket_sessions());
        tracing::info!(
            address = %listener.local_addr().unwrap_or(address),
            tls = http.tls.is_some(),
            "serving HTTP (the operator panel at /, the WebSocket at /ws, RuntimeMCP at /mcp, /healthz, /readyz)"
        );
        let runtime = runtime.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            if let Err(error) = crate::http_surface::serve(listener, runtime, http, shutdown).await {
                tracing::error!(%error, "the HTTP surface stopped");
            }
        });
    }
    if let Some(tls) = tls {
        tracing::info!("serving TLS only");
        server = server.with_tls(tls);
    }
    server.run(listener, shutdown).await;
    // The server has stopped; the scripts were told to stop with it, and the background task
    // saw the same cancellation and is writing its last history.
    live.stopped(grace).await
}

/// The plant running as `serve` runs it: its sources, its scripts, and the background work
/// (the simulator, the historian's flushes, settings followed live), all until the shutdown
/// they were started with.
#[derive(Debug)]
pub(crate) struct LivePlant {
    scripts: plant::scripts::ScriptRuns,
    background: tokio::task::JoinHandle<()>,
}

impl LivePlant {
    /// Starts the plant's sources, scripts and background work until `shutdown`; `simulator`
    /// pins the simulator on or off (`None`: the solution's `SimulatorEnabled`, followed live).
    pub(crate) async fn start(
        runtime: &Runtime,
        simulator: Option<bool>,
        shutdown: &CancellationToken,
    ) -> anyhow::Result<Self> {
        let sources = runtime
            .start_sources(shutdown)
            .await
            .context("cannot start the plant's sources")?;
        if sources > 0 {
            tracing::info!(sources, "sources started");
        }
        let notifications = runtime
            .start_notifications(shutdown)
            .await
            .context("cannot start the plant's notifications")?;
        if notifications > 0 {
            tracing::info!(notifications, "notifications started");
        }
        let scripts = runtime.start_scripts(shutdown).await;
        runtime.simulate_now(simulator);
        let background = tokio::spawn({
            let runtime = runtime.clone();
            let shutdown = shutdown.clone();
            async move { runtime.run_background_with(simulator, shutdown).await }
        });
        Ok(Self { scripts, background })
    }

    /// After the shutdown: waits up to `grace` for script runs under way, then for the
    /// background work's last history write.
    pub(crate) async fn stopped(self, grace: Duration) -> anyhow::Result<()> {
        if !self.scripts.ended(grace).await {
            tracing::warn!("script runs still under way after the grace period are abandoned");
        }
        self.background.await.context("the background task failed")
    }
}
