//! The `tserver` command line: serve a solution, create one, and administer it.
//!
//! Admin commands open the solution file directly and work while a server runs on it.

use std::io::{BufRead, IsTerminal, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::own_runtime::on_own_runtime;
use crate::{Runtime, Server, ServerConfig};
use store::{
    KEY_ENV, RuntimeKey, ServeLock, SettingKey, SolutionError, SolutionLocation, Store, copy_solution,
    key_file,
};

/// TServer: the runtime server of the automation platform, with its Local AI assistant.
#[derive(Debug, Parser)]
#[command(name = "tserver", version, about)]
pub struct Cli {
    /// How log lines are written (to stderr, filtered by RUST_LOG): text for people, or json,
    /// one object a line with the spans' fields (a connection's guid, a call's call_id).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text per event, with its spans' fields before it.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, the event's fields (`message`
    /// among them) and `spans`, the fields of each span it happened in.
    Json,
}

/// The layer that writes log lines in `format` to `writer` (text with ANSI colours when
/// `ansi`). The server and the tests that check logs for secrets build it the same way.
pub fn log_layer<S, W>(format: LogFormat, writer: W, ansi: bool) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_ansi(ansi)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .with_writer(writer)
            .boxed(),
    }
}

/// The `tserver` subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve display clients on a solution until SIGINT or SIGTERM.
    Serve(ServeArgs),
    /// Create a new solution file.
    Init {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// Add the demo plant and a passwordless `guest` user.
        #[arg(long)]
        demo: bool,
        /// For a `postgres://` solution without TSERVER_SECRETS_KEY set: where to write its new
        /// secrets key (default: `DATABASE.key` in the current directory). A solution file
        /// keeps its key beside it.
        #[arg(long, value_name = "FILE")]
        key_file: Option<PathBuf>,
    },
    /// Read or change the Local AI settings (works while a server runs).
    Settings {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// The action.
        #[command(subcommand)]
        action: SettingsAction,
    },
    /// Manage the secrets that `/secret:<Name>` tokens refer to (values are write-only).
    Secrets {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// The action.
        #[command(subcommand)]
        action: SecretsAction,
    },
    /// Run one atomic Local AI call in process, as a server script's `TK.AIExecute` does, and
    /// print the reply envelope JSON on one line.
    AiExecute(AiExecuteArgs),
    /// Manage the users who may log in (works while a server runs).
    Users {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// The action.
        #[command(subcommand)]
        action: UsersAction,
    },
    /// Print the audit trail: every tag write and alarm acknowledgement clients asked for
    /// (kept `AuditRetentionDays`, 365 by default; `export` saves it before it is pruned).
    Audit {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// Only entries since then: a time (RFC 3339, e.g. 2026-11-23T08:00:00Z) or an age
        /// (e.g. 2h, 30min).
        #[arg(long, value_parser = parse_since, global = true)]
        since: Option<std::time::SystemTime>,
        /// At most this many entries (the oldest first; `export` has no limit).
        #[arg(long, default_value_t = 1000)]
        limit: usize,
        /// `export`: every entry (since `--since`) as CSV or JSON lines on standard output.
        #[command(subcommand)]
        action: Option<AuditCommand>,
    },
    /// Import, export or show the plant model: folders, equipment, tags and alarms (a running
    /// server picks an import up within about a second).
    Plant {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// The action.
        #[command(subcommand)]
        action: PlantAction,
    },
    /// The plant's MQTT sources: those the plant file declares, and what the running server's
    /// connections to them report.
    Sources {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// The action.
        #[command(subcommand)]
        action: SourcesAction,
    },
    /// API tokens for the HTTP surface (RuntimeMCP): each acts as a user, with that user's role.
    Tokens {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// The action.
        #[command(subcommand)]
        action: TokensAction,
    },
    /// Solution scripts (Rhai): tasks, tag and alarm callbacks, and classes, run in the server.
    Scripts {
        /// Where the solution is.
        #[command(flatten)]
        solution: SolutionArg,
        /// The action.
        #[command(subcommand)]
        action: crate::scripts::ScriptsAction,
    },
    /// Make TLS certificates: a private CA and a server certificate it signed.
    Tls {
        /// The action.
        #[command(subcommand)]
        action: crate::certificates::TlsAction,
    },
    /// Move a whole solution between a SQLite file and a PostgreSQL database.
    Solution {
        /// The action.
        #[command(subcommand)]
        action: SolutionAction,
    },
}

impl Command {
    /// The solution the command works on, for the commands that take one (given first or as
    /// `--solution`).
    pub fn solution(&self) -> Option<anyhow::Result<SolutionLocation>> {
        let solution = match self {
            Self::Serve(args) => &args.solution,
            Self::Init { solution, .. }
            | Self::Settings { solution, .. }
            | Self::Secrets { solution, .. }
            | Self::Users { solution, .. }
            | Self::Audit { solution, .. }
            | Self::Plant { solution, .. }
            | Self::Sources { solution, .. }
            | Self::Tokens { solution, .. }
            | Self::Scripts { solution, .. } => solution,
            Self::AiExecute(args) => return Some(args.solution_and_query().map(|(solution, _)| solution)),
            Self::Tls { .. } | Self::Solution { .. } => return None,
        };
        Some(solution.location().cloned())
    }
}

/// `tserver ai-execute [SOLUTION] QUERY` or `tserver ai-execute --solution SOLUTION QUERY`.
#[derive(Debug, Args)]
pub struct AiExecuteArgs {
    /// The solution, as an option.
    #[arg(long = "solution", value_name = "SOLUTION")]
    solution: Option<SolutionLocation>,
    /// The solution (unless given as --solution), then the query: plain text, or a JSON object
    /// with system, user, context and metadata.
    #[arg(value_name = "[SOLUTION] QUERY", num_args = 1..=2, required = true)]
    words: Vec<String>,
}

impl AiExecuteArgs {
    /// The solution and the query, from whichever form was given.
    pub fn solution_and_query(&self) -> anyhow::Result<(SolutionLocation, &str)> {
        match (&self.solution, self.words.as_slice()) {
            (Some(solution), [query]) => Ok((solution.clone(), query)),
            // Parsed here rather than by clap: which word is the solution depends on whether
            // --solution was given.
            (None, [solution, query]) => Ok((SolutionLocation::parse(solution)?, query)),
            (Some(_), _) => bail!("give the query once: the solution is already --solution"),
            (None, _) => bail!("give the solution and the query: `tserver ai-execute SOLUTION QUERY`"),
        }
    }
}

/// `tserver solution` actions.
#[derive(Debug, Subcommand)]
pub enum SolutionAction {
    /// Copy a solution into a destination that holds none yet: a file into a database
    /// (`postgres://user@host/database`; the password from the URL, PGPASSWORD or ~/.pgpass),
    /// or a database into a new file. Secrets stay encrypted: the destination needs the same
    /// key (TSERVER_SECRETS_KEY, or the key file a copy out of a database writes from it).
    Copy {
        /// The solution to copy: a file or a `postgres://` URL.
        from: SolutionLocation,
        /// Where to copy it.
        to: SolutionLocation,
    },
}

/// `tserver tokens` actions.
#[derive(Debug, Subcommand)]
pub enum TokensAction {
    /// Make a token and print it, once: only a digest of it is stored.
    Create {
        /// The user it acts as.
        #[arg(long)]
        user: String,
        /// Days until it stops working (default: never).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=3650))]
        expires: Option<u32>,
        /// A label to recognise it by in `list` (and revoke it by).
        #[arg(long, default_value = "")]
        name: String,
    },
    /// Every token: id, label, user, when made and when it expires (never the token).
    List,
    /// Revoke a token by its id (or its label, when no other token has it); it stops working
    /// at its next use.
    Revoke {
        /// The token's id or label.
        token: String,
    },
}

/// `tserver sources` actions.
#[derive(Debug, Subcommand)]
pub enum SourcesAction {
    /// The sources the plant declares (change them in the plant file and import it).
    List,
    /// What the running server reports of each source: connected or not, messages read,
    /// messages refused by kind, the last error (written by the server every 2 seconds).
    Status,
}

/// A report older than this is from a server that has stopped (it writes every 2 s).
const SOURCE_REPORT_FRESH: std::time::Duration = std::time::Duration::from_secs(10);

/// `tserver audit` actions.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Every entry (since `--since`), oldest first, on standard output: CSV with a header
    /// row, or one JSON object a line.
    Export {
        /// `csv` or `jsonl`.
        #[arg(long, value_enum, default_value_t = ExportFormat::Csv)]
        format: ExportFormat,
    },
}

/// How `tserver audit PATH export` writes the entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Comma-separated values, with a header row.
    Csv,
    /// One JSON object a line.
    Jsonl,
}

/// The audit's columns, as exported.
const AUDIT_COLUMNS: [&str; 9] = [
    "time",
    "action",
    "target",
    "user",
    "peer",
    "connection",
    "old_value",
    "new_value",
    "outcome",
];

/// Writes `entries` as `format` to `output`.
fn export_audit(
    entries: &[store::AuditEntry],
    format: ExportFormat,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let fields = |entry: &store::AuditEntry| {
        [
            localai::iso8601_millis(entry.time),
            entry.action.as_str().to_owned(),
            entry.target.clone(),
            entry.user.clone(),
            entry.peer.clone(),
            entry.connection.clone(),
            entry.old_value.clone().unwrap_or_default(),
            entry.new_value.clone().unwrap_or_default(),
            entry.outcome.clone(),
        ]
    };
    match format {
        ExportFormat::Csv => {
            let mut writer = csv::Writer::from_writer(output);
            writer.write_record(AUDIT_COLUMNS)?;
            for entry in entries {
                writer.write_record(fields(entry))?;
            }
            writer.flush()?;
        }
        ExportFormat::Jsonl => {
            for entry in entries {
                let object: serde_json::Map<String, serde_json::Value> = AUDIT_COLUMNS
                    .iter()
                    .zip(fields(entry))
                    .map(|(name, value)| ((*name).to_owned(), serde_json::Value::String(value)))
                    .collect();
                writeln!(output, "{}", serde_json::Value::Object(object))?;
            }
        }
    }
    Ok(())
}

/// `tserver plant` actions.
#[derive(Debug, Subcommand)]
pub enum PlantAction {
    /// Replace the plant with a plant file (TOML, or JSON by its `.json` extension), checking
    /// all of it first: on any error nothing changes. Prints what was added, changed and
    /// removed.
    Import {
        /// The plant file (docs/PLANT.md).
        file: PathBuf,
        /// Check and say what would change, without changing anything.
        #[arg(long)]
        dry_run: bool,
    },
    /// Write the plant model as a TOML plant file (to standard output without FILE).
    Export {
        /// Where to write it.
        file: Option<PathBuf>,
    },
    /// Summarize the plant: counts, equipment, folders.
    Show,
    /// Delete the recorded history of a tag that is no longer in the plant (history of
    /// removed tags is otherwise kept until `HistoryRetentionHours` ages it out).
    PurgeHistory {
        /// The tag's dotted name.
        tag: String,
    },
}

/// Where an admin command's solution is: a file, or a `postgres://` URL; given first
/// (`tserver users plant.db list`) or as `--solution` (`tserver users --solution plant.db list`).
#[derive(Debug, Clone, clap::Args)]
pub struct SolutionArg {
    /// The solution: a file, or a `postgres://` URL (`init`: one to create).
    #[arg(
        value_name = "SOLUTION",
        required_unless_present = "solution",
        conflicts_with = "solution"
    )]
    at: Option<SolutionLocation>,
    /// The solution, as an option.
    #[arg(long = "solution", value_name = "SOLUTION")]
    solution: Option<SolutionLocation>,
}

impl SolutionArg {
    /// The location given.
    pub fn location(&self) -> anyhow::Result<&SolutionLocation> {
        self.at
            .as_ref()
            .or(self.solution.as_ref())
            .context("give the solution: a file or a postgres:// URL, first or as --solution")
    }
}

impl From<SolutionLocation> for SolutionArg {
    fn from(location: SolutionLocation) -> Self {
        Self {
            at: Some(location),
            solution: None,
        }
    }
}

/// Options of `tserver serve`; every limit defaults to the value in `docs/LIMITS.md`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The solution to serve, first or as `--solution`: a file, or a `postgres://` URL shared
    /// by several nodes (its password from the URL, PGPASSWORD or ~/.pgpass; secrets' key from
    /// TSERVER_SECRETS_KEY).
    #[command(flatten)]
    pub solution: SolutionArg,
    /// Also serve HTTP on this address: RuntimeMCP at /mcp for external AI clients (bearer
    /// tokens from `tserver tokens`). Off by default. With --tls-cert it serves HTTPS only,
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

fn parse_since(text: &str) -> Result<std::time::SystemTime, String> {
    if let Ok(time) = humantime::parse_rfc3339_weak(text) {
        return Ok(time);
    }
    humantime::parse_duration(text)
        .ok()
        .and_then(|age| std::time::SystemTime::now().checked_sub(age))
        .ok_or_else(|| format!("{text:?} is neither a time (2026-11-23T08:00:00Z) nor an age (2h)"))
}

fn parse_role(text: &str) -> Result<store::Role, String> {
    store::Role::parse(text).ok_or_else(|| format!("{text:?} is not a role: viewer, operator or admin"))
}

fn parse_switch(text: &str) -> Result<bool, String> {
    store::parse_bool(text).ok_or_else(|| format!("{text:?} is not on or off"))
}

/// `tserver settings` actions. KEY is `ModelEnabled`, `ModelOptions`, `ModelSettings`, one of
/// the ModelSettings keys `URL`, `Name`, `Authorization`, `Headers`, `Info`, `TimeoutSeconds`,
/// or `ModelSettings.<Key>` for any other key.
#[derive(Debug, Subcommand)]
pub enum SettingsAction {
    /// Print a setting's effective value.
    Get {
        /// The key.
        key: String,
    },
    /// Change a setting. ModelSettings keys are edited in place; other keys are kept.
    Set {
        /// The key.
        key: String,
        /// The value (`ModelOptions` accepts `158` or `0x9e`; `ModelSettings` a JSON object or NULL).
        /// A value starting with `-` is a value too, so `-1` reaches the check that refuses it.
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
    /// Return a setting to its default.
    Unset {
        /// The key.
        key: String,
    },
    /// Print the three columns.
    Show,
}

/// `tserver secrets` actions.
#[derive(Debug, Subcommand)]
pub enum SecretsAction {
    /// Store a secret; the value is read from the first line of standard input.
    Set {
        /// The name used in `/secret:<Name>` tokens.
        name: String,
    },
    /// List secret names (never values).
    List,
    /// Remove a secret.
    Remove {
        /// The name.
        name: String,
    },
}

/// `tserver users` actions.
#[derive(Debug, Subcommand)]
pub enum UsersAction {
    /// Add a user; the password is read from the first line of standard input.
    Add {
        /// The user name.
        name: String,
        /// Create a passwordless user (logs in with an empty password).
        #[arg(long)]
        no_password: bool,
        /// `viewer` (reads and chats), `operator` (also writes writable tags and acknowledges
        /// alarms) or `admin`.
        #[arg(long, default_value = "viewer", value_parser = parse_role)]
        role: store::Role,
    },
    /// Change a user's role (the user's sessions end within about a second).
    Role {
        /// The user name.
        name: String,
        /// `viewer`, `operator` or `admin`.
        #[arg(value_parser = parse_role)]
        role: store::Role,
    },
    /// Change a user's password, read from the first line of standard input.
    Passwd {
        /// The user name.
        name: String,
        /// Make the user passwordless.
        #[arg(long)]
        no_password: bool,
    },
    /// Remove a user.
    Remove {
        /// The user name.
        name: String,
    },
    /// List users (names only, never hashes).
    List,
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
pub async fn serve(args: &ServeArgs, shutdown: CancellationToken) -> anyhow::Result<()> {
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    serve_on(args, listener, shutdown).await
}

/// Runs `serve` on a listener the caller bound (tests bind `127.0.0.1:0`); `--listen` is not
/// used.
pub async fn serve_on(
    args: &ServeArgs,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let config = args.config()?;
    // Certificates are checked before anything starts, so a bad file is a clear start error.
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            Some(tserver_proto::server_config(cert, key).context("cannot set up TLS")?)
        }
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
    let sources = runtime
        .start_sources(&shutdown)
        .await
        .context("cannot start the plant's MQTT sources")?;
    if sources > 0 {
        tracing::info!(sources, "MQTT sources started");
    }
    let scripts = runtime.start_scripts(&shutdown).await;
    let grace = config.shutdown_grace;
    let mut server = Server::new(runtime.clone(), config)?;
    if let Some(address) = args.http {
        let listener = TcpListener::bind(address)
            .await
            .with_context(|| format!("cannot listen for HTTP on {address}"))?;
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
        tracing::info!(
            address = %listener.local_addr().unwrap_or(address),
            tls = http.tls.is_some(),
            "serving HTTP (RuntimeMCP at /mcp, /healthz, /readyz)"
        );
        let runtime = runtime.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            if let Err(error) = crate::http_surface::serve(listener, runtime, http, shutdown).await {
                tracing::error!(%error, "the HTTP surface stopped");
            }
        });
    }
    let background = tokio::spawn({
        let runtime = runtime.clone();
        let shutdown = shutdown.clone();
        let pinned = args.simulator;
        async move { runtime.run_background_with(pinned, shutdown).await }
    });
    if let Some(tls) = tls {
        tracing::info!("serving TLS only");
        server = server.with_tls(tls);
    }
    server.run(listener, shutdown).await;
    // The server has stopped; the scripts were told to stop with it, and the background task
    // saw the same cancellation and is writing its last history.
    if !scripts.ended(grace).await {
        tracing::warn!("script runs still under way after the grace period are abandoned");
    }
    background.await.context("the background task failed")?;
    Ok(())
}

/// Runs `ai-execute`: one atomic call through the script toolkit, returning the envelope JSON.
pub async fn ai_execute(solution: &SolutionLocation, query: &str) -> anyhow::Result<String> {
    let runtime = Runtime::open_at(solution)
        .await
        .with_context(|| format!("cannot open solution {solution}"))?;
    Ok(runtime.toolkit().ai_execute_async(query).await)
}

/// How much history a new demo solution starts with, and how far apart its samples are.
const DEMO_HISTORY_SPAN: Duration = Duration::from_secs(2 * 3600);
const DEMO_HISTORY_STEP: Duration = Duration::from_secs(30);

/// Runs an admin command (everything but `serve`), reading secrets from `input` and writing
/// results to `output`.
pub fn run_admin(command: &Command, input: &mut dyn BufRead, output: &mut dyn Write) -> anyhow::Result<()> {
    match command {
        Command::Serve(_) | Command::AiExecute(_) => bail!("not an admin command"),
        Command::Init {
            solution,
            demo,
            key_file,
        } => {
            let solution = solution.location()?;
            if key_file.is_some() && matches!(solution, SolutionLocation::File(_)) {
                bail!(
                    "--key-file is for a postgres:// solution: a solution file keeps its key beside it ({solution}.key)"
                );
            }
            match solution {
                SolutionLocation::File(path) => create_file_solution(path, *demo)?,
                SolutionLocation::Postgres(url) => {
                    // Made as a file first, so a database starts with what a file would.
                    let scratch = tempfile::tempdir().context("cannot make a scratch directory")?;
                    let path = scratch.path().join("new.db");
                    create_file_solution(&path, *demo)?;
                    let from = SolutionLocation::File(path);
                    let to = SolutionLocation::Postgres(url.clone());
                    on_own_runtime(|| copy_solution(&from, &to))?;
                }
            }
            let kind = if *demo { "demo solution" } else { "solution" };
            writeln!(output, "created {kind} {solution}")?;
            if let SolutionLocation::Postgres(url) = solution {
                writeln!(output, "{}", database_key(url, key_file.as_deref())?)?;
            }
            output.write_all(next_steps(solution, *demo).as_bytes())?;
        }
        Command::Settings { solution, action } => {
            let solution = solution.location()?;
            let lines = on_own_runtime(|| settings_command(solution, action))?;
            output.write_all(lines.as_bytes())?;
        }
        Command::Secrets { solution, action } => {
            let solution = solution.location()?;
            // The value is read here, before the store is: standard input is this thread's.
            let value = match action {
                SecretsAction::Set { .. } => Some(read_first_line(input, "secret value", "")?),
                SecretsAction::List | SecretsAction::Remove { .. } => None,
            };
            let lines = on_own_runtime(|| secrets_command(solution, action, value.as_deref()))?;
            output.write_all(lines.as_bytes())?;
        }
        Command::Plant { solution, action } => plant_command(solution.location()?, action, output)?,
        Command::Sources { solution, action } => {
            let solution = solution.location()?;
            output.write_all(on_own_runtime(|| sources_command(solution, action))?.as_bytes())?;
        }
        Command::Tokens { solution, action } => {
            let solution = solution.location()?;
            output.write_all(on_own_runtime(|| tokens_command(solution, action))?.as_bytes())?;
        }
        Command::Scripts { solution, action } => {
            crate::scripts::scripts_command(solution.location()?, action, output)?;
        }
        Command::Tls { action } => crate::certificates::tls_command(action, output)?,
        Command::Solution {
            action: SolutionAction::Copy { from, to },
        } => {
            let report = on_own_runtime(|| copy_solution(from, to))?;
            for (table, rows) in &report.tables {
                writeln!(output, "{table}: {rows} rows")?;
            }
            writeln!(output, "copied {from} to {to}")?;
            if report.has_secrets {
                let key = match from {
                    SolutionLocation::File(path) => key_file(path).display().to_string(),
                    SolutionLocation::Postgres(_) => KEY_ENV.to_owned(),
                };
                writeln!(
                    output,
                    "the secrets are copied encrypted: every server of {to} needs the key of {key} ({KEY_ENV})"
                )?;
            }
        }
        Command::Audit {
            solution,
            since,
            limit,
            action,
        } => {
            let solution = solution.location()?;
            let limit = if action.is_some() { usize::MAX } else { *limit };
            let entries =
                on_own_runtime(|| async { Store::open(solution).await?.audit(*since, limit).await })?;
            if let Some(AuditCommand::Export { format }) = action {
                return export_audit(&entries, *format, output);
            }
            for entry in entries {
                let change = match (&entry.old_value, &entry.new_value) {
                    (Some(old), Some(new)) => format!(" {old} -> {new}"),
                    (None, Some(new)) => format!(" -> {new}"),
                    _ => String::new(),
                };
                writeln!(
                    output,
                    "{} {} {} by {} ({} on {}){change}: {}",
                    localai::iso8601_millis(entry.time),
                    match entry.action {
                        store::AuditAction::Write => "write",
                        store::AuditAction::Acknowledge => "acknowledge",
                    },
                    entry.target,
                    entry.user,
                    entry.peer,
                    entry.connection,
                    entry.outcome
                )?;
            }
        }
        Command::Users { solution, action } => {
            let solution = solution.location()?;
            // The password is read here, before the store is: standard input is this thread's.
            let password = match action {
                UsersAction::Add { no_password, .. } | UsersAction::Passwd { no_password, .. } => {
                    read_password(*no_password, input)?
                }
                UsersAction::Role { .. } | UsersAction::Remove { .. } | UsersAction::List => None,
            };
            let lines = on_own_runtime(|| users_command(solution, action, password.as_deref()))?;
            output.write_all(lines.as_bytes())?;
        }
    }
    Ok(())
}

/// The secrets key of a new database solution: a database keeps none, so every node and admin
/// command takes it from the environment. One set already is that key; otherwise a fresh one
/// is written to `key_file` or `<database>.key` here (an existing file there is kept and used).
/// Says which.
fn database_key(url: &store::PostgresUrl, key_file: Option<&Path>) -> anyhow::Result<String> {
    if std::env::var_os(KEY_ENV).is_some() {
        return Ok(format!(
            "secrets key: the {KEY_ENV} set here; every node and admin command on this solution needs the same"
        ));
    }
    let path = key_file.map_or_else(
        || PathBuf::from(format!("{}.key", url.database().unwrap_or("solution"))),
        Path::to_path_buf,
    );
    let shown = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
    let made = if path.exists() {
        format!("kept the secrets key file {}", shown.display())
    } else {
        store::create_key_at(&path)?;
        format!("made a secrets key in {} (owner-only)", shown.display())
    };
    let quoted = shlex::try_quote(&shown.display().to_string())
        .map_or_else(|_| shown.display().to_string(), |q| q.into_owned());
    Ok(format!(
        "{made}: a database keeps none, so every node and admin command on it needs it in \
         {KEY_ENV}, e.g. `export {KEY_ENV}=$(cat {quoted})`"
    ))
}

/// What to do after `init`: the commands that make a new solution useful, with its location
/// quoted for a shell. A new solution has no users (a demo has `guest`), no runtime tools
/// (a demo has them), and Local AI off.
fn next_steps(solution: &SolutionLocation, demo: bool) -> String {
    let shown = solution.to_string();
    let at = shlex::try_quote(&shown).map_or_else(|_| shown.clone(), |quoted| quoted.into_owned());
    let mut lines = String::from("next:\n");
    let mut step = |command: String, why: &str| {
        lines.push_str(&format!("  # {why}\n  {command}\n"));
    };
    if !demo {
        step(
            format!("tserver users {at} add NAME --role operator"),
            "a login (password on standard input; --no-password for none)",
        );
        step(
            format!("tserver plant {at} import plant.toml"),
            "your plant (docs/PLANT.md), or `init --demo` for the demo's",
        );
        step(
            format!("tserver settings {at} set ModelOptions 0x9e"),
            "the assistant's runtime tools (UNS, alarms, history)",
        );
    }
    step(
        format!("tserver settings {at} set URL http://localhost:11434/v1/chat/completions"),
        "the model (any OpenAI-compatible endpoint)",
    );
    step(
        format!("tserver settings {at} set Name qwen2.5:7b-instruct"),
        "the model's name at that endpoint",
    );
    step(
        format!("tserver settings {at} set ModelEnabled true"),
        "Local AI on (off until then)",
    );
    if !demo {
        step(
            format!("tserver settings {at} set SimulatorEnabled on"),
            "move the plant's simulated tags while serving",
        );
    }
    step(
        format!("tserver serve {at}"),
        "serve display clients on 127.0.0.1:3101",
    );
    if let SolutionLocation::File(_) = solution {
        step(
            format!("tserver-demo --solution {at}"),
            "or: chat with it now through the built-in rule-based model",
        );
    }
    lines
}

/// `tserver settings`, on either backend; returns what it prints.
/// A new solution file, with the demo plant and its seeded history when `demo`.
fn create_file_solution(path: &std::path::Path, demo: bool) -> anyhow::Result<()> {
    Store::create_file(path, demo)?;
    if demo {
        Runtime::open(path)?.seed_history(DEMO_HISTORY_SPAN, DEMO_HISTORY_STEP)?;
    }
    Ok(())
}

async fn secrets_command(
    solution: &SolutionLocation,
    action: &SecretsAction,
    value: Option<&str>,
) -> anyhow::Result<String> {
    let store = Store::open(solution).await?;
    Ok(match action {
        SecretsAction::Set { name } => {
            store.set_secret(name, value.unwrap_or_default()).await?;
            format!("stored secret {name}\n")
        }
        SecretsAction::List => store
            .secret_names()
            .await?
            .iter()
            .map(|name| format!("{name}\n"))
            .collect(),
        SecretsAction::Remove { name } => {
            store.remove_secret(name).await?;
            format!("removed secret {name}\n")
        }
    })
}

async fn settings_command(solution: &SolutionLocation, action: &SettingsAction) -> anyhow::Result<String> {
    use std::fmt::Write as _;
    let store = Store::open(solution).await?;
    let mut lines = String::new();
    match action {
        SettingsAction::Get { key } => writeln!(lines, "{}", store.setting(&SettingKey::parse(key)?).await?)?,
        SettingsAction::Set { key, value } => {
            let key = SettingKey::parse(key)?;
            store.set_setting(&key, value).await?;
            write_when_seen(&mut lines, &store, &key).await?;
        }
        SettingsAction::Unset { key } => {
            let key = SettingKey::parse(key)?;
            store.unset_setting(&key).await?;
            write_when_seen(&mut lines, &store, &key).await?;
        }
        SettingsAction::Show => {
            for key in [
                SettingKey::ModelEnabled,
                SettingKey::ModelOptions,
                SettingKey::ModelSettings,
            ] {
                writeln!(lines, "{key:?} = {}", store.setting(&key).await?)?;
            }
            for key in RuntimeKey::ALL {
                let value = store.setting(&SettingKey::Runtime(key)).await?;
                writeln!(lines, "{} = {value}", key.as_str())?;
            }
            for issue in store.settings_issues().await? {
                writeln!(lines, "warning: {issue}")?;
            }
        }
    }
    Ok(lines)
}

/// For a runtime setting, its value now and when a running server uses it. The Local AI
/// settings print nothing: every call reads them.
async fn write_when_seen(lines: &mut String, store: &Store, key: &SettingKey) -> anyhow::Result<()> {
    use std::fmt::Write as _;
    let SettingKey::Runtime(runtime_key) = key else {
        return Ok(());
    };
    let value = store.setting(key).await?;
    let when = match runtime_key {
        RuntimeKey::SimulatorEnabled => {
            "a running server follows it within a second (one started with `--simulator on|off` keeps that)"
        }
        RuntimeKey::HistoryRetentionHours => {
            "a running server follows it within a second, pruning by it at its next history flush"
        }
        RuntimeKey::AuditRetentionDays => {
            "a running server follows it within a second, pruning by it at its next prune (the first audited action an hour or more after the last)"
        }
    };
    writeln!(lines, "{} = {value}: {when}", runtime_key.as_str())?;
    Ok(())
}

/// `tserver users`, on either backend, with the password already read; returns what it prints.
async fn users_command(
    solution: &SolutionLocation,
    action: &UsersAction,
    password: Option<&str>,
) -> anyhow::Result<String> {
    use std::fmt::Write as _;
    let store = Store::open(solution).await?;
    let mut lines = String::new();
    match action {
        UsersAction::Add { name, role, .. } => {
            store.add_user(name, password, *role).await?;
            writeln!(lines, "added user {name} ({})", role.as_str())?;
        }
        UsersAction::Role { name, role } => {
            store.set_role(name, *role).await?;
            writeln!(lines, "{name} is now {}", role.as_str())?;
        }
        UsersAction::Passwd { name, .. } => {
            store.set_password(name, password).await?;
            writeln!(lines, "changed the password of {name}")?;
        }
        UsersAction::Remove { name } => {
            store.remove_user(name).await?;
            writeln!(lines, "removed user {name}")?;
        }
        UsersAction::List => {
            for user in store.users().await? {
                let kind = if user.password_hash.is_some() {
                    ""
                } else {
                    " (passwordless)"
                };
                writeln!(lines, "{} {}{kind}", user.name, user.role.as_str())?;
            }
        }
    }
    Ok(lines)
}

/// Runs a `tserver plant` action.
async fn tokens_command(solution: &SolutionLocation, action: &TokensAction) -> anyhow::Result<String> {
    use std::fmt::Write as _;
    let store = Store::open(solution).await?;
    let mut output = String::new();
    let when = |time: std::time::SystemTime| localai::iso8601_millis(time);
    match action {
        TokensAction::Create { user, expires, name } => {
            let valid_for = expires.map(|days| std::time::Duration::from_secs(u64::from(days) * 86_400));
            let (token, text) = store.create_token(user, name, valid_for).await?;
            writeln!(output, "{text}")?;
            let until = token.expires_at.map_or_else(
                || "never expires".to_owned(),
                |time| format!("expires {}", when(time)),
            );
            eprintln!(
                "token {} for {} ({until}); it is shown only now: store it where it is needed",
                token.id, token.user
            );
        }
        TokensAction::List => {
            let tokens = store.tokens().await?;
            if tokens.is_empty() {
                writeln!(output, "no tokens")?;
            }
            for token in tokens {
                let until = token.expires_at.map_or_else(|| "never".to_owned(), when);
                let label = if token.name.is_empty() {
                    String::new()
                } else {
                    format!("  {:?}", token.name)
                };
                writeln!(
                    output,
                    "{}{label}  user {}  created {}  expires {until}",
                    token.id,
                    token.user,
                    when(token.created_at)
                )?;
            }
        }
        TokensAction::Revoke { token } => {
            let revoked = store.revoke_token(token).await?;
            writeln!(output, "revoked token {} of {}", revoked.id, revoked.user)?;
        }
    }
    Ok(output)
}

async fn sources_command(solution: &SolutionLocation, action: &SourcesAction) -> anyhow::Result<String> {
    use std::fmt::Write as _;
    let store = Store::open(solution).await?;
    let mut output = String::new();
    match action {
        SourcesAction::List => {
            let model = store.plant_model().await?;
            if model.sources.is_empty() {
                writeln!(output, "no sources: the plant's values come from the runtime")?;
            }
            let expanded = model.expand();
            for source in &model.sources {
                let tags = expanded
                    .tags
                    .iter()
                    .filter(|tag| {
                        tag.source
                            .as_ref()
                            .is_some_and(|binding| binding.broker == source.name)
                    })
                    .count();
                let root = if source.root.is_empty() {
                    String::new()
                } else {
                    format!("  root {}", source.root)
                };
                writeln!(output, "{}  {}{root}  {tags} tags", source.name, source.url)?;
            }
        }
        SourcesAction::Status => {
            let reports = store.source_reports().await?;
            if reports.is_empty() {
                writeln!(
                    output,
                    "no reports: no server with MQTT sources has run on this solution"
                )?;
            }
            for report in reports {
                let age = report.reported_at.elapsed().unwrap_or_default();
                let when = if age > SOURCE_REPORT_FRESH {
                    format!(
                        "  (reported {} ago: the server is not running; this is how it left it)",
                        humantime::format_duration(std::time::Duration::from_secs(age.as_secs()))
                    )
                } else {
                    String::new()
                };
                let fields: serde_json::Value = serde_json::from_str(&report.report)
                    .with_context(|| format!("the report of source {} does not read", report.name))?;
                let connected = if fields["connected"].as_bool() == Some(true) {
                    "connected"
                } else {
                    "NOT connected"
                };
                let node = report
                    .node
                    .as_ref()
                    .map_or_else(String::new, |node| format!(" on {node}"));
                writeln!(
                    output,
                    "{}{node}: {connected}, {} tags, {} messages read, {} writes, {} rebirths asked{when}",
                    report.name,
                    fields["tags"],
                    fields["messages"],
                    fields["writes"],
                    fields["rebirths_requested"]
                )?;
                if let Some(errors) = fields["errors"].as_object()
                    && !errors.is_empty()
                {
                    let counts: Vec<String> = errors
                        .iter()
                        .map(|(kind, count)| format!("{kind} {count}"))
                        .collect();
                    writeln!(output, "  refused: {}", counts.join(", "))?;
                }
                if let Some(message) = fields["last_error"]["message"].as_str() {
                    writeln!(
                        output,
                        "  last error at {}: {message}",
                        fields["last_error"]["time"].as_str().unwrap_or("?")
                    )?;
                }
            }
        }
    }
    Ok(output)
}

/// A plant file's text: at most [`plant_model::MAX_FILE_BYTES`] are read from whatever the
/// path names (a regular file, a device such as `/dev/zero`, a FIFO), so no file makes an
/// import read for ever or hold more than the bound.
fn read_plant_file(file: &Path, shown: &str) -> anyhow::Result<String> {
    use std::io::Read as _;
    let limit = plant_model::MAX_FILE_BYTES;
    let mut bytes = Vec::new();
    std::fs::File::open(file)
        .with_context(|| format!("cannot read {shown}"))?
        .take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {shown}"))?;
    if bytes.len() > limit {
        bail!("{shown} has more than {limit} bytes; a plant file may have at most {limit}");
    }
    String::from_utf8(bytes).map_err(|error| {
        anyhow::anyhow!(
            "{shown} is not UTF-8 text (byte {} is not)",
            error.utf8_error().valid_up_to()
        )
    })
}

fn plant_command(
    solution: &SolutionLocation,
    action: &PlantAction,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    match action {
        PlantAction::Import { file, dry_run } => {
            let shown = file.display().to_string();
            let text = read_plant_file(file, &shown)?;
            let model =
                plant_model::read(&text, plant_model::Format::of_file(&shown), &shown).map_err(|errors| {
                    anyhow::anyhow!(
                        "{errors}
nothing changed: fix the errors above and import again"
                    )
                })?;
            let (changes, stranded) = on_own_runtime(|| async {
                let store = Store::open(solution).await?;
                let stranded = crate::scripts::stranded_by(&store, &model.expand()).await?;
                let changes = store.import_plant(&model, &shown, *dry_run).await?;
                Ok::<_, anyhow::Error>((changes, stranded))
            })?;
            write_changes(&changes, *dry_run, output)?;
            for stranded in stranded {
                // Imported all the same: the plant is the truth, and `scripts status` keeps
                // saying so until the script or its trigger is changed.
                writeln!(output, "warning: {stranded}")?;
            }
            if *dry_run {
                writeln!(output, "nothing changed (dry run)")?;
            } else {
                writeln!(output, "imported {shown}")?;
            }
        }
        PlantAction::Export { file } => {
            let text = on_own_runtime(|| async { Store::open(solution).await?.plant_model().await })?
                .to_toml()
                .context("the plant model cannot be written as TOML")?;
            match file {
                Some(file) => {
                    std::fs::write(file, text).with_context(|| format!("cannot write {}", file.display()))?;
                    writeln!(output, "exported the plant model to {}", file.display())?;
                }
                None => output.write_all(text.as_bytes())?,
            }
        }
        PlantAction::Show => {
            let (model, revision) = on_own_runtime(|| async {
                let store = Store::open(solution).await?;
                Ok::<_, SolutionError>((store.plant_model().await?, store.plant_revision().await?))
            })?;
            let expanded = model.expand();
            if let Some(plant) = &model.plant {
                writeln!(output, "{} ({})", plant.name, plant.description)?;
            }
            writeln!(
                output,
                "revision {}: {} tags, {} alarms, {} equipment of {} types, {} described folders",
                revision,
                expanded.tags.len(),
                expanded.alarms.len(),
                model.equipment.len(),
                model.types.len(),
                model.folders.len()
            )?;
            for instance in &model.equipment {
                writeln!(
                    output,
                    "  {} ({}) at {}",
                    instance.name, instance.kind, instance.path
                )?;
            }
            let mut by_folder: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
            for tag in &expanded.tags {
                let folder = tag.path.rsplit_once('/').map_or("", |(folder, _)| folder);
                *by_folder.entry(folder).or_default() += 1;
            }
            for (folder, count) in by_folder {
                writeln!(output, "  {folder}/: {count} tags")?;
            }
        }
        PlantAction::PurgeHistory { tag } => {
            let removed =
                on_own_runtime(|| async { Store::open(solution).await?.purge_tag_history(tag).await })?;
            writeln!(output, "deleted {removed} history samples of {tag}")?;
        }
    }
    Ok(())
}

/// What an import changed (or would), one line per kind and one per name.
fn write_changes(
    changes: &store::PlantChanges,
    dry_run: bool,
    output: &mut dyn Write,
) -> std::io::Result<()> {
    if changes.is_empty() {
        return writeln!(
            output,
            "no changes: the plant is already as the file describes it"
        );
    }
    let verb = if dry_run { "would be " } else { "" };
    for (kind, list) in [
        ("tags", &changes.tags),
        ("alarms", &changes.alarms),
        ("folders", &changes.folders),
    ] {
        if list.is_empty() {
            continue;
        }
        writeln!(
            output,
            "{kind}: {} {verb}added, {} {verb}changed, {} {verb}removed",
            list.added.len(),
            list.changed.len(),
            list.removed.len()
        )?;
        for (mark, names) in [("+", &list.added), ("~", &list.changed), ("-", &list.removed)] {
            for name in names {
                writeln!(output, "  {mark} {name}")?;
            }
        }
    }
    if !changes.tags.removed.is_empty() {
        writeln!(
            output,
            "the history of removed tags is kept until HistoryRetentionHours ages it out; \
             `tserver plant PATH purge-history TAG` deletes it now"
        )?;
    }
    Ok(())
}

/// Reads a password from the first line of `input`, unless the user is to be passwordless.
fn read_password(no_password: bool, input: &mut dyn BufRead) -> anyhow::Result<Option<String>> {
    if no_password {
        return Ok(None);
    }
    let hint = "; pipe one in, or pass --no-password for a passwordless user";
    read_first_line(input, "password", hint).map(Some)
}

/// Reads the first line of `input` (without its line ending); an empty line is refused.
fn read_first_line(input: &mut dyn BufRead, what: &str, hint: &str) -> anyhow::Result<String> {
    let mut line = String::new();
    input
        .read_line(&mut line)
        .with_context(|| format!("cannot read the {what} from standard input"))?;
    let value = line.trim_end_matches(['\n', '\r']);
    if value.is_empty() {
        bail!("no {what} given (the first line of standard input is empty){hint}");
    }
    Ok(value.to_owned())
}

/// The log filter: `RUST_LOG` (default `info`), with rmcp's own lines off unless `RUST_LOG`
/// names rmcp. rmcp logs what MCP clients send whole (their `clientInfo`, method names,
/// request ids, notifications) at info, warn and error, and session ids at info; the HTTP
/// surface logs what an operator needs of MCP itself, bounded.
pub fn log_filter(rust_log: Option<&str>) -> EnvFilter {
    let spec = rust_log.filter(|spec| !spec.trim().is_empty()).unwrap_or("info");
    let mut filter = EnvFilter::try_new(spec).unwrap_or_else(|_| EnvFilter::new("info"));
    let names_rmcp = spec
        .split(',')
        .any(|directive| directive.trim_start().starts_with("rmcp"));
    if !names_rmcp && let Ok(off) = "rmcp=off".parse() {
        filter = filter.add_directive(off);
    }
    filter
}

/// The whole `tserver` program: parses the command line, sets up logging on stderr (filtered by
/// `RUST_LOG`, default `info`) and runs the command. `serve` stops gracefully on SIGINT or
/// SIGTERM.
pub fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::registry()
        .with(log_filter(std::env::var("RUST_LOG").ok().as_deref()))
        .with(log_layer(
            cli.log_format,
            std::io::stderr,
            std::io::stderr().is_terminal(),
        ))
        .init();

    match &cli.command {
        Command::Serve(args) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            runtime.block_on(async {
                let shutdown = CancellationToken::new();
                tokio::spawn(cancel_on_signal(shutdown.clone()));
                serve(args, shutdown).await
            })
        }
        Command::AiExecute(args) => {
            let (solution, query) = args.solution_and_query()?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            let envelope = runtime.block_on(ai_execute(&solution, query))?;
            println!("{envelope}");
            Ok(())
        }
        command => {
            let prompt = match command {
                Command::Users {
                    action:
                        UsersAction::Add {
                            name,
                            no_password: false,
                            ..
                        }
                        | UsersAction::Passwd {
                            name,
                            no_password: false,
                        },
                    ..
                } => Some(format!("password of {name}: ")),
                Command::Secrets {
                    action: SecretsAction::Set { name },
                    ..
                } => Some(format!("value of secret {name}: ")),
                _ => None,
            };
            match prompt {
                // On a terminal the value is typed without echo; piped in, it is the first line.
                Some(prompt) if std::io::stdin().is_terminal() => {
                    let typed = read_hidden(&prompt)?;
                    run_admin(
                        command,
                        &mut std::io::Cursor::new(format!("{typed}\n")),
                        &mut std::io::stdout().lock(),
                    )
                }
                _ => run_admin(
                    command,
                    &mut std::io::stdin().lock(),
                    &mut std::io::stdout().lock(),
                ),
            }
        }
    }
}

/// Asks for a value on standard error and reads it from the terminal on standard input without
/// echoing it (that terminal need not be the process's controlling one).
fn read_hidden(prompt: &str) -> anyhow::Result<String> {
    let config = rpassword::ConfigBuilder::new()
        .input_file_path("/dev/stdin")
        .output_file_path("/dev/stderr")
        .build();
    rpassword::prompt_password_with_config(prompt, config).context("cannot read it from the terminal")
}

/// Cancels `shutdown` on the first SIGINT (Ctrl-C) or SIGTERM.
async fn cancel_on_signal(shutdown: CancellationToken) {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("SIGINT received"),
        () = terminate => tracing::info!("SIGTERM received"),
    }
    shutdown.cancel();
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::{Context, SubscriberExt};

    use super::*;

    /// Records the target and level of every event it is shown.
    struct Seen(Arc<Mutex<Vec<String>>>);

    impl<S: tracing::Subscriber> Layer<S> for Seen {
        fn on_event(&self, event: &tracing::Event<'_>, _context: Context<'_, S>) {
            let metadata = event.metadata();
            self.0
                .lock()
                .expect("lock")
                .push(format!("{} {}", metadata.target(), metadata.level()));
        }
    }

    /// The events of rmcp and of tserver that [`log_filter`] lets through for `rust_log`.
    fn passed(rust_log: Option<&str>) -> Vec<String> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry()
            .with(log_filter(rust_log))
            .with(Seen(Arc::clone(&seen)));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "rmcp::service", "Service initialized as server");
            tracing::error!(target: "rmcp::transport::streamable_http_server", "Failed to serve session");
            tracing::info!(target: "tserver::server", "listening");
            tracing::debug!(target: "tserver::server", "details");
        });
        // The subscriber, and the layer's handle with it, is gone once `with_default` returns.
        Arc::try_unwrap(seen)
            .expect("the only handle left")
            .into_inner()
            .expect("lock")
    }

    #[test]
    fn rmcp_logs_nothing_unless_rust_log_names_it() {
        assert_eq!(passed(None), ["tserver::server INFO"]);
        assert_eq!(passed(Some("info")), ["tserver::server INFO"]);
        assert_eq!(
            passed(Some("debug")),
            ["tserver::server INFO", "tserver::server DEBUG"],
            "not even at debug"
        );
        assert_eq!(
            passed(Some("info,rmcp=error")),
            [
                "rmcp::transport::streamable_http_server ERROR",
                "tserver::server INFO"
            ],
            "an operator naming rmcp gets what they named"
        );
    }
}
