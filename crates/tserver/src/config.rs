//! Server limits with their written defaults (also listed in `docs/LIMITS.md`).

use std::time::Duration;

use localai::TranscriptBudget;
use tserver_proto::DEFAULT_MAX_FRAME;

use crate::WebSocketLimits;
use crate::proxy::TrustedProxies;
use store::LoginThrottleConfig;

/// The smallest max frame a server accepts.
pub const MIN_MAX_FRAME: usize = 4096;

/// The limits one [`Server`](crate::Server) enforces. Every limit refuses excess with a typed
/// error or a close; nothing queues without bound.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub(crate) max_frame: usize,
    pub(crate) max_connections: usize,
    pub(crate) login_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_calls_in_flight: usize,
    pub(crate) write_timeout: Duration,
    pub(crate) shutdown_grace: Duration,
    pub(crate) max_concurrent_logins: usize,
    pub(crate) max_login_frame: usize,
    pub(crate) max_frames_before_login: u32,
    pub(crate) max_unauthenticated: usize,
    pub(crate) login_throttle: LoginThrottleConfig,
    pub(crate) transcripts: TranscriptBudget,
    pub(crate) metrics: bool,
    pub(crate) trusted_proxies: TrustedProxies,
    /// `None`: [`WebSocketLimits::for_connections`] of the connection cap.
    pub(crate) websockets: Option<WebSocketLimits>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_frame: DEFAULT_MAX_FRAME,
            max_connections: 1024,
            login_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(300),
            max_calls_in_flight: 32,
            write_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(10),
            max_concurrent_logins: std::thread::available_parallelism().map_or(2, usize::from),
            max_login_frame: 4096,
            max_frames_before_login: 8,
            max_unauthenticated: 256,
            login_throttle: LoginThrottleConfig::default(),
            transcripts: TranscriptBudget::default(),
            metrics: true,
            trusted_proxies: TrustedProxies::default(),
            websockets: None,
        }
    }
}

impl ServerConfig {
    /// Whether the process's metrics recorder is installed (what `/metrics` serves). Off, every
    /// metric is dropped where it is recorded and `/metrics` answers 404. Default on.
    pub fn with_metrics(mut self, on: bool) -> Self {
        self.metrics = on;
        self
    }

    /// Largest protobuf body of one frame, both directions. Default 1 MiB; at least 4 KiB
    /// (smaller values are raised), so a reply envelope always has room to say what it cut.
    pub fn with_max_frame(mut self, bytes: usize) -> Self {
        self.max_frame = bytes.max(MIN_MAX_FRAME);
        self
    }

    /// Connections served at once; past it a new connection gets a `busy` error and is closed.
    /// Default 1024.
    pub fn with_max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// How many of the connection slots WebSockets may hold: all together, from one address,
    /// logged in as one user. Default: half the connection cap, 64, 128. The total is never
    /// above the connection cap.
    pub fn with_websocket_limits(mut self, limits: WebSocketLimits) -> Self {
        self.websockets = Some(limits);
        self
    }

    /// The WebSocket limits in force.
    pub(crate) fn websocket_limits(&self) -> WebSocketLimits {
        let limits = self
            .websockets
            .unwrap_or_else(|| WebSocketLimits::for_connections(self.max_connections));
        WebSocketLimits {
            total: limits.total.clamp(1, self.max_connections),
            per_address: limits.per_address.max(1),
            per_user: limits.per_user.max(1),
        }
    }

    /// Time a new (or logged-out) connection has to complete Hello. Default 5 s.
    pub fn with_login_timeout(mut self, timeout: Duration) -> Self {
        self.login_timeout = timeout;
        self
    }

    /// A connection with no frame either way and no call in flight for this long is closed.
    /// Default 300 s.
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Unanswered calls per connection; past it a call is answered `busy`. Default 32.
    pub fn with_max_calls_in_flight(mut self, calls: usize) -> Self {
        self.max_calls_in_flight = calls.max(1);
        self
    }

    /// How long a write may wait for a client that does not read. Default 30 s.
    pub fn with_write_timeout(mut self, timeout: Duration) -> Self {
        self.write_timeout = timeout;
        self
    }

    /// How long shutdown waits for calls in flight before closing anyway. Default 10 s.
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Password verifications (argon2, memory-hard) run at once; more wait their turn.
    /// Default: the number of CPU cores.
    pub fn with_max_concurrent_logins(mut self, logins: usize) -> Self {
        self.max_concurrent_logins = logins.max(1);
        self
    }

    /// Largest frame body accepted from a connection that has not logged in (a Hello is a few
    /// dozen bytes). Default 4 KiB; never above the max frame.
    pub fn with_max_login_frame(mut self, bytes: usize) -> Self {
        self.max_login_frame = bytes;
        self
    }

    /// Frames a connection may send before it has logged in, Hello attempts included; the next
    /// one closes it. Default 8.
    pub fn with_max_frames_before_login(mut self, frames: u32) -> Self {
        self.max_frames_before_login = frames.max(1);
        self
    }

    /// Connections not yet logged in, at once; past it a new connection gets `busy` and is
    /// closed, so unauthenticated clients can never take every slot. Default 256.
    pub fn with_max_unauthenticated(mut self, connections: usize) -> Self {
        self.max_unauthenticated = connections.max(1);
        self
    }

    /// The proxies whose PROXY protocol header names the client (`serve --trusted-proxy`): a
    /// connection from one must start with that header, and its address is then the client's
    /// for the throttle, the logs and the audit. Default none.
    pub fn with_trusted_proxies(mut self, proxies: TrustedProxies) -> Self {
        self.trusted_proxies = proxies;
        self
    }

    /// How failed logins are throttled per peer address.
    pub fn with_login_throttle(mut self, throttle: LoginThrottleConfig) -> Self {
        self.login_throttle = throttle;
        self
    }

    /// The history bytes chat transcripts keep: per connection (default 512 KiB; a turn larger
    /// than that is answered but not remembered) and all together (default 64 MiB; least
    /// recently used sessions lose their oldest turns first).
    pub fn with_transcript_budget(mut self, budget: TranscriptBudget) -> Self {
        self.transcripts = budget;
        self
    }

    /// The frame limit for a connection that has not logged in.
    pub(crate) fn login_frame_limit(&self) -> usize {
        self.max_login_frame.min(self.max_frame)
    }
}
