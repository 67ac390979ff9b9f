//! `tclient bench`: the bundled load-test client.
//!
//! Opens connections, runs calls in flight on each, and measures every call in an HDR
//! histogram. Closed loop by default (each worker sends its next call when the last one
//! returns); with `--rate` it is open loop: every call has an intended send time on a fixed
//! schedule, and its latency is measured from that time, so a server that stalls is charged for
//! the calls it delayed (no coordinated omission, as in wrk2). Every run is bounded in time.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use futures::StreamExt;
use hdrhistogram::Histogram;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use service_client::{Client, ClientError, ClientOptions, Envelope};

/// The longest a run with `--count` and no `--duration` may take.
const COUNT_TIME_LIMIT: Duration = Duration::from_secs(600);

/// Connections opened at once while setting up.
const CONNECT_CONCURRENCY: usize = 128;

/// Largest latency the histograms hold (longer calls are recorded as this).
const MAX_RECORDED: Duration = Duration::from_secs(600);

/// What each call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// A Ping round trip.
    Ping,
    /// A chat turn (whatever the server's Local AI settings make of it: the gate, a model).
    Chat,
    /// A streamed chat turn, read to its reply. Against a model that stamps its answers
    /// (`scripted-llm --stream --stamp`), also the time from the model's first chunk of the
    /// answer to its first text at this client.
    ChatStream,
    /// A streamed chat turn whose model proposes an action (`scripted-llm --mode propose`):
    /// timed to its reply, and from the question to the proposal here (`proposalSeenUs`; an
    /// error `no_proposal` when none came), then declined, untimed, so that proposals never
    /// reach their caps.
    Propose,
    /// A display read of tag values.
    Tags,
    /// Write every tag of `--tags` (an operator's login) with the current time in Unix
    /// microseconds as its value, so `watch` clients can time each change.
    Write,
    /// Subscribe to `--folder` at `--max-rate` frames a second for the duration, and time each
    /// stamped change (see `write`) from its write to its arrival here.
    Watch,
    /// Log in, hold the connections idle for the duration, then ping each once.
    Idle,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Self::Ping => "ping",
            Self::Chat => "chat",
            Self::ChatStream => "chat-stream",
            Self::Propose => "propose",
            Self::Tags => "tags",
            Self::Write => "write",
            Self::Watch => "watch",
            Self::Idle => "idle",
        }
    }
}

/// Options of `tclient bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// What each call does.
    #[arg(value_enum)]
    pub scenario: Scenario,
    /// Connections to open (each logs in).
    #[arg(long, short = 'c', default_value_t = 1)]
    pub connections: usize,
    /// Calls in flight on each connection.
    #[arg(long, default_value_t = 1)]
    pub in_flight: usize,
    /// How long to measure, e.g. `10s` (default 10 s; with `--count`, a limit of 10 min).
    #[arg(long, short = 'd', value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// Stop after this many measured calls.
    #[arg(long, short = 'n')]
    pub count: Option<u64>,
    /// Calls before measuring starts, to warm connections and caches.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub warmup: Duration,
    /// Open loop: send this many calls per second in all, on a fixed schedule.
    #[arg(long)]
    pub rate: Option<f64>,
    /// The chat query (plain text or a JSON query object).
    #[arg(long, default_value = "What is the value of Pump1.MotorCurrent?")]
    pub query: String,
    /// The tags each `tags` call reads and each `write` call writes; `Prefix*N` stands for
    /// `Prefix0000` to `Prefix{N-1}` (four digits).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "Pump1.MotorCurrent,Pump1.FlowRate,Tank1.Level"
    )]
    pub tags: Vec<String>,
    /// Sign each `write` as the logged-in user (its password entered again, meaning
    /// performed), for tags whose writes are signed: what a signature costs.
    #[arg(long)]
    pub sign: bool,
    /// The folder `watch` subscribes to.
    #[arg(long, default_value = "/")]
    pub folder: String,
    /// The frames a second each `watch` subscription may get (at most 100).
    #[arg(long, default_value_t = 100)]
    pub max_rate: u32,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Where a run connects and as whom.
#[derive(Debug, Clone)]
pub struct Target {
    /// The server address.
    pub addr: String,
    /// The user to log in as.
    pub user: String,
    /// Their password.
    pub password: String,
    /// Client options (call timeout and frame limit).
    pub options: ClientOptions,
}

/// The measured outcome of one run.
#[derive(Debug)]
pub struct BenchReport {
    scenario: Scenario,
    connections: usize,
    in_flight: usize,
    rate: Option<f64>,
    elapsed: Duration,
    latency: Histogram<u64>,
    /// A turn's milestone on its way: for `chat-stream` against a stamping model, from the
    /// answer's first chunk at the model to its first text here; for `propose`, from the
    /// question to the proposal here.
    milestone: Histogram<u64>,
    /// Replies by outcome: `ok` for ping and tags, the envelope status for chat.
    outcomes: BTreeMap<String, u64>,
    /// Failed calls and connections by kind.
    errors: BTreeMap<String, u64>,
    /// Connections that logged in (for `idle`, those still answering at the end).
    held: usize,
    /// For `watch`: changes the server merged away (a slow reader, or faster than the rate).
    skipped: u64,
}

impl BenchReport {
    /// Calls that got a reply, whatever its outcome.
    pub fn calls(&self) -> u64 {
        self.latency.len()
    }

    /// Failed calls and connections.
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// The report as JSON (latencies in microseconds).
    pub fn to_json(&self) -> Value {
        let quantile = |q: f64| self.latency.value_at_quantile(q) as f64 / 1000.0;
        let seconds = self.elapsed.as_secs_f64();
        let milestone = |q: f64| self.milestone.value_at_quantile(q) as f64 / 1000.0;
        let milestone = (!self.milestone.is_empty()).then(|| {
            json!({"count": self.milestone.len(), "p50": milestone(0.5), "p90": milestone(0.9),
                   "p99": milestone(0.99), "max": self.milestone.max() as f64 / 1000.0})
        });
        let mut report = json!({
            "scenario": self.scenario.name(),
            "connections": self.connections,
            "inFlightPerConnection": self.in_flight,
            "mode": if self.rate.is_some() { "open" } else { "closed" },
            "rate": self.rate,
            "seconds": seconds,
            "calls": self.calls(),
            "callsPerSecond": if seconds > 0.0 { self.calls() as f64 / seconds } else { 0.0 },
            "latencyUs": {
                "p50": quantile(0.5),
                "p90": quantile(0.9),
                "p99": quantile(0.99),
                "p999": quantile(0.999),
                "max": self.latency.max() as f64 / 1000.0,
                "mean": self.latency.mean() / 1000.0,
            },
            "outcomes": self.outcomes,
            "errors": self.errors,
            "connectionsHeld": self.held,
            "skipped": self.skipped,
        });
        report[self.milestone_name().0] = milestone.into();
        report
    }

    /// The milestone's key in the JSON report, and what the table says it is.
    fn milestone_name(&self) -> (&'static str, &'static str) {
        match self.scenario {
            Scenario::Propose => ("proposalSeenUs", "proposal (from the question)"),
            _ => ("firstTextUs", "1st text (from the model's first chunk)"),
        }
    }

    /// The report as a small table for a person.
    pub fn write_table(&self, output: &mut dyn Write) -> std::io::Result<()> {
        let ms = |nanos: u64| nanos as f64 / 1e6;
        let mode = match self.rate {
            Some(rate) => format!("open loop at {rate} calls/s"),
            None => "closed loop".to_owned(),
        };
        writeln!(
            output,
            "{}: {} connection(s) x {} in flight, {mode}, {:.1} s measured",
            self.scenario.name(),
            self.connections,
            self.in_flight,
            self.elapsed.as_secs_f64()
        )?;
        let seconds = self.elapsed.as_secs_f64().max(f64::EPSILON);
        writeln!(
            output,
            "  calls     {} ({:.0}/s)",
            self.calls(),
            self.calls() as f64 / seconds
        )?;
        if self.calls() > 0 {
            writeln!(
                output,
                "  latency   p50 {:.3} ms  p90 {:.3} ms  p99 {:.3} ms  p99.9 {:.3} ms  max {:.3} ms",
                ms(self.latency.value_at_quantile(0.5)),
                ms(self.latency.value_at_quantile(0.9)),
                ms(self.latency.value_at_quantile(0.99)),
                ms(self.latency.value_at_quantile(0.999)),
                ms(self.latency.max())
            )?;
        }
        if !self.milestone.is_empty() {
            writeln!(
                output,
                "  {}  p50 {:.3} ms  p90 {:.3} ms  p99 {:.3} ms  max {:.3} ms",
                self.milestone_name().1,
                ms(self.milestone.value_at_quantile(0.5)),
                ms(self.milestone.value_at_quantile(0.9)),
                ms(self.milestone.value_at_quantile(0.99)),
                ms(self.milestone.max())
            )?;
        }
        let list = |map: &BTreeMap<String, u64>| {
            if map.is_empty() {
                "none".to_owned()
            } else {
                map.iter()
                    .map(|(kind, count)| format!("{kind} {count}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        writeln!(output, "  outcomes  {}", list(&self.outcomes))?;
        writeln!(output, "  errors    {}", list(&self.errors))?;
        if self.scenario == Scenario::Idle {
            writeln!(output, "  held      {} of {}", self.held, self.connections)?;
        }
        Ok(())
    }
}

/// What a worker collected.
struct Tally {
    latency: Histogram<u64>,
    milestone: Histogram<u64>,
    outcomes: BTreeMap<String, u64>,
    errors: BTreeMap<String, u64>,
}

impl Tally {
    /// The report of a run of `args` that measured for `elapsed` with `held` connections
    /// logged in (a scenario with its own in-flight count, rate or merges sets them after).
    fn into_report(self, args: &BenchArgs, elapsed: Duration, held: usize) -> BenchReport {
        BenchReport {
            scenario: args.scenario,
            connections: args.connections,
            in_flight: args.in_flight,
            rate: args.rate,
            elapsed,
            latency: self.latency,
            milestone: self.milestone,
            outcomes: self.outcomes,
            errors: self.errors,
            held,
            skipped: 0,
        }
    }

    fn new() -> anyhow::Result<Self> {
        let max = u64::try_from(MAX_RECORDED.as_nanos()).unwrap_or(u64::MAX);
        let histogram = || Histogram::new_with_bounds(1, max, 3).context("cannot make a histogram");
        Ok(Self {
            latency: histogram()?,
            milestone: histogram()?,
            outcomes: BTreeMap::new(),
            errors: BTreeMap::new(),
        })
    }

    fn record(&mut self, latency: Duration, outcome: Result<String, String>) {
        match outcome {
            Ok(outcome) => {
                let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
                self.latency.saturating_record(nanos.max(1));
                *self.outcomes.entry(outcome).or_default() += 1;
            }
            Err(kind) => *self.errors.entry(kind).or_default() += 1,
        }
    }

    fn merge(&mut self, other: Tally) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.latency.add(&other.latency);
        let _ = self.milestone.add(&other.milestone);
        for (kind, count) in other.outcomes {
            *self.outcomes.entry(kind).or_default() += count;
        }
        for (kind, count) in other.errors {
            *self.errors.entry(kind).or_default() += count;
        }
    }
}

/// A short, stable name for a failure, for the errors table.
fn error_kind(error: &ClientError) -> String {
    match error {
        ClientError::Connect { .. } => "connect".to_owned(),
        ClientError::ConnectTimeout { .. } => "connect_timeout".to_owned(),
        ClientError::NoAddress => "no_address".to_owned(),
        ClientError::Unreachable { .. } => "unreachable".to_owned(),
        ClientError::Tls { .. } => "tls".to_owned(),
        ClientError::LoginRefused { .. } => "login_refused".to_owned(),
        ClientError::Server { code, .. } => format!("server_{}", code.as_str_name().to_lowercase()),
        ClientError::Timeout { .. } => "timeout".to_owned(),
        ClientError::ConnectionLost { .. } => "connection_lost".to_owned(),
        ClientError::UnexpectedReply { .. } => "unexpected_reply".to_owned(),
        ClientError::InvalidEnvelope(_) => "invalid_envelope".to_owned(),
    }
}

/// Raises this process's open-file limit as far as the hard limit allows, so thousands of
/// connections fit; returns the soft limit now in force.
pub fn raise_open_file_limit() -> u64 {
    rlimit::increase_nofile_limit(u64::MAX).unwrap_or(0)
}

/// Runs the benchmark and writes the report (table or JSON) to `output`.
pub async fn run(args: &BenchArgs, target: &Target, output: &mut dyn Write) -> anyhow::Result<BenchReport> {
    if args.connections == 0 || args.in_flight == 0 {
        bail!("--connections and --in-flight must be at least 1");
    }
    if let Some(rate) = args.rate
        && !(rate.is_finite() && rate > 0.0)
    {
        bail!("--rate must be a positive number of calls per second, not {rate}");
    }
    if args.count == Some(0) {
        bail!("--count must be at least 1");
    }
    let limit = raise_open_file_limit();
    if limit != 0 && (args.connections as u64) + 64 > limit {
        bail!(
            "{} connections need more open files than this process may have ({limit}); raise `ulimit -n`",
            args.connections
        );
    }
    let measure_for = args.duration.unwrap_or(if args.count.is_some() {
        COUNT_TIME_LIMIT
    } else {
        Duration::from_secs(10)
    });

    let (clients, setup) = connect_all(args.connections, target).await?;
    let report = match args.scenario {
        Scenario::Idle => hold_idle(args, &clients, measure_for, setup).await,
        Scenario::Watch => watch_load(args, &clients, measure_for, setup).await?,
        _ => drive_load(args, target, &clients, measure_for, setup).await?,
    };
    if args.json {
        writeln!(output, "{}", report.to_json())?;
    } else {
        report.write_table(output)?;
    }
    Ok(report)
}

/// Opens and logs in `count` connections, a bounded number at a time. Failures are tallied;
/// it is an error only when none succeeds.
async fn connect_all(count: usize, target: &Target) -> anyhow::Result<(Vec<Client>, Tally)> {
    let mut setup = Tally::new()?;
    let attempts = futures::stream::iter(0..count)
        .map(|_| async move {
            let client = Client::connect(target.addr.as_str(), target.options.clone()).await?;
            client.login(&target.user, &target.password).await?;
            Ok::<Client, ClientError>(client)
        })
        .buffer_unordered(CONNECT_CONCURRENCY);
    let results: Vec<Result<Client, ClientError>> = attempts.collect().await;
    let mut clients = Vec::with_capacity(count);
    for result in results {
        match result {
            Ok(client) => clients.push(client),
            Err(error) => setup.record(Duration::ZERO, Err(error_kind(&error))),
        }
    }
    if clients.is_empty() {
        let kinds: Vec<&String> = setup.errors.keys().collect();
        bail!("no connection to {} could log in ({kinds:?})", target.addr);
    }
    // Setup logins are not part of any scenario's latency.
    setup.latency.reset();
    setup.outcomes.clear();
    Ok((clients, setup))
}

/// Holds the logged-in connections for the duration, then pings each once to see it is alive.
async fn hold_idle(args: &BenchArgs, clients: &[Client], hold: Duration, mut tally: Tally) -> BenchReport {
    let progress = Progress::start(hold);
    let no_calls = AtomicU64::new(0);
    tokio::select! {
        () = tokio::time::sleep(hold) => {}
        () = progress.tick(&no_calls) => {}
    }
    progress.finish();
    let started = Instant::now();
    let pings = futures::stream::iter(clients)
        .map(|client| async move {
            let sent = Instant::now();
            let outcome = client.ping().await;
            (sent.elapsed(), outcome)
        })
        .buffer_unordered(CONNECT_CONCURRENCY);
    let results: Vec<(Duration, Result<Duration, ClientError>)> = pings.collect().await;
    let mut held = 0;
    for (latency, outcome) in results {
        held += usize::from(outcome.is_ok());
        tally.record(
            latency,
            outcome
                .map(|_| "ok".to_owned())
                .map_err(|error| error_kind(&error)),
        );
    }
    BenchReport {
        rate: None,
        ..tally.into_report(args, started.elapsed(), held)
    }
}

/// Microseconds since the Unix epoch now: the stamp `write` puts in each value.
fn now_micros() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64() * 1e6)
}

/// Subscribes on every connection and times each stamped change until the duration is over.
async fn watch_load(
    args: &BenchArgs,
    clients: &[Client],
    measure_for: Duration,
    setup: Tally,
) -> anyhow::Result<BenchReport> {
    let started = Instant::now();
    let measure_from = started + args.warmup;
    let until = tokio::time::Instant::from_std(measure_from + measure_for);
    let mut tasks = tokio::task::JoinSet::new();
    for client in clients {
        let client = client.clone();
        let request = service_client::SubscribeRequest {
            folder: args.folder.clone(),
            max_rate: args.max_rate,
            ..service_client::SubscribeRequest::default()
        };
        tasks.spawn(async move {
            let mut tally = Tally::new()?;
            let mut skipped = 0u64;
            let mut subscription = match client.subscribe(request).await {
                Ok(subscription) => subscription,
                Err(error) => {
                    tally.record(Duration::ZERO, Err(error_kind(&error)));
                    return Ok::<_, anyhow::Error>((tally, skipped));
                }
            };
            loop {
                let update = tokio::select! {
                    () = tokio::time::sleep_until(until) => break,
                    update = subscription.next_update() => update,
                };
                let Some(update) = update else {
                    tally.record(Duration::ZERO, Err("connection_lost".to_owned()));
                    break;
                };
                if Instant::now() < measure_from {
                    continue;
                }
                skipped += update.skipped;
                let now = now_micros();
                for reading in &update.readings {
                    // Only values `write` stamped (this century, in microseconds).
                    if let Some(service_client::TagValue::Number(stamp)) = reading.value
                        && stamp > 1.0e15
                        && stamp <= now
                    {
                        tally.record(
                            Duration::from_secs_f64((now - stamp) / 1e6),
                            Ok("reading".to_owned()),
                        );
                    }
                }
            }
            let _ = subscription.unsubscribe().await;
            Ok((tally, skipped))
        });
    }
    let progress = Progress::start(args.warmup + measure_for);
    let no_calls = AtomicU64::new(0);
    let mut tally = setup;
    let mut skipped = 0;
    tokio::select! {
        () = tokio::time::sleep_until(until) => {}
        () = progress.tick(&no_calls) => {}
    }
    while let Some(joined) = tasks.join_next().await {
        let (part, part_skipped) = joined.context("a watch task failed")??;
        tally.merge(part);
        skipped += part_skipped;
    }
    progress.finish();
    Ok(BenchReport {
        in_flight: 1,
        rate: None,
        skipped,
        ..tally.into_report(args, measure_for, clients.len())
    })
}

/// `--tags` with every `Prefix*N` expanded.
fn expand_tags(tags: &[String]) -> Vec<String> {
    let mut names = Vec::new();
    for tag in tags {
        match tag
            .rsplit_once('*')
            .and_then(|(prefix, count)| Some((prefix, count.parse::<usize>().ok()?)))
        {
            Some((prefix, count)) => names.extend((0..count).map(|index| format!("{prefix}{index:04}"))),
            None => names.push(tag.clone()),
        }
    }
    names
}

/// Shared state of the workers of one run.
struct Run {
    scenario: Scenario,
    query: String,
    tags: Vec<String>,
    /// What each `write` is signed with (`--sign`).
    signatures: Vec<service_client::Signature>,
    /// Measurement starts here; calls sent before it are warm-up.
    measure_from: Instant,
    /// Calls still to measure with `--count`.
    remaining: Option<AtomicI64>,
    /// Calls measured so far, for the progress line.
    done: AtomicU64,
    stop: CancellationToken,
}

impl Run {
    /// Whether a call starting now may go; counts it when measuring with `--count`.
    fn may_send(&self, now: Instant) -> bool {
        if self.stop.is_cancelled() {
            return false;
        }
        match &self.remaining {
            Some(remaining) if now >= self.measure_from => {
                if remaining.fetch_sub(1, Ordering::Relaxed) <= 0 {
                    self.stop.cancel();
                    return false;
                }
                true
            }
            _ => true,
        }
    }

    /// One call: its outcome, the time to its milestone (see [`BenchReport`]) when it has one,
    /// and when the timed part ended.
    async fn call(&self, client: &Client) -> (Result<String, String>, Option<Duration>, Instant) {
        match self.scenario {
            Scenario::ChatStream => {
                let (outcome, first_text) = match chat_streamed(client, &self.query).await {
                    Ok((status, first_text)) => (Ok(status), first_text),
                    Err(error) => (Err(error), None),
                };
                return (outcome, first_text, Instant::now());
            }
            Scenario::Propose => {
                let (outcome, seen, ended) = propose_and_decline(client, &self.query).await;
                return (outcome, seen, ended);
            }
            _ => {}
        }
        let outcome = match self.scenario {
            // Idle and watch run on their own (`hold_idle`, `watch_load`); a call of theirs is a ping.
            Scenario::Ping | Scenario::Idle | Scenario::Watch => client.ping().await.map(|_| "ok".to_owned()),
            Scenario::Tags => {
                let names: Vec<&str> = self.tags.iter().map(String::as_str).collect();
                client.read_tags(&names).await.map(|_| "ok".to_owned())
            }
            Scenario::Write => {
                let stamp = now_micros();
                let writes = self
                    .tags
                    .iter()
                    .map(|name| service_client::TagWrite {
                        name: name.clone(),
                        value: Some(service_client::WriteValue::Number(stamp)),
                    })
                    .collect();
                client
                    .write_tags_signed(writes, self.signatures.clone())
                    .await
                    .map(|results| {
                        if results.iter().all(|result| result.error.is_empty()) {
                            "ok".to_owned()
                        } else {
                            "refused".to_owned()
                        }
                    })
            }
            Scenario::Chat | Scenario::ChatStream | Scenario::Propose => match client.chat(&self.query).await
            {
                Ok(json) => return (envelope_status(&json), None, Instant::now()),
                Err(error) => Err(error),
            },
        };
        (outcome.map_err(|error| error_kind(&error)), None, Instant::now())
    }
}

/// A reply's outcome: its envelope's status.
fn envelope_status(json: &str) -> Result<String, String> {
    Envelope::from_json(json)
        .map(|envelope| envelope.status.as_str().to_owned())
        .map_err(|_| "invalid_envelope".to_owned())
}

/// A streamed chat turn read to its reply: the envelope's status, and how long after the
/// model stamped its answer (`t=<Unix microseconds> `) the answer's first text arrived.
async fn chat_streamed(client: &Client, query: &str) -> Result<(String, Option<Duration>), String> {
    let mut stream = client
        .chat_stream(query)
        .await
        .map_err(|error| error_kind(&error))?;
    let mut first_text = None;
    while let Some(event) = stream.next_event().await {
        if let service_client::ChatEvent::Text(text) = event
            && first_text.is_none()
        {
            let now = std::time::SystemTime::now();
            first_text = text
                .strip_prefix("t=")
                .and_then(|rest| rest.split(' ').next())
                .and_then(|micros| micros.parse::<u64>().ok())
                .and_then(|micros| {
                    now.duration_since(std::time::UNIX_EPOCH + Duration::from_micros(micros))
                        .ok()
                });
        }
    }
    let reply = stream.reply().await.map_err(|error| error_kind(&error))?;
    Ok((envelope_status(&reply.reply_json)?, first_text))
}

/// A streamed turn whose model proposes: its status, how long after the question the first
/// proposal came, and when its reply came; then what it proposed declined, after the timed part.
async fn propose_and_decline(
    client: &Client,
    query: &str,
) -> (Result<String, String>, Option<Duration>, Instant) {
    let asked = Instant::now();
    let mut stream = match client.chat_stream(query).await {
        Ok(stream) => stream,
        Err(error) => return (Err(error_kind(&error)), None, Instant::now()),
    };
    let mut proposed = Vec::new();
    let mut seen = None;
    while let Some(event) = stream.next_event().await {
        if let service_client::ChatEvent::ProposalMade(proposal) = event {
            seen.get_or_insert_with(|| asked.elapsed());
            proposed.push(proposal.id);
        }
    }
    let reply = stream.reply().await;
    let ended = Instant::now();
    let outcome = match reply {
        Ok(reply) if !proposed.is_empty() => envelope_status(&reply.reply_json),
        Ok(_) => Err("no_proposal".to_owned()),
        Err(error) => Err(error_kind(&error)),
    };
    for id in &proposed {
        if let Err(error) = client
            .decide_proposal(id, service_client::Decision::Decline, "")
            .await
        {
            return (Err(error_kind(&error)), seen, ended);
        }
    }
    (outcome, seen, ended)
}

async fn drive_load(
    args: &BenchArgs,
    target: &Target,
    clients: &[Client],
    measure_for: Duration,
    setup: Tally,
) -> anyhow::Result<BenchReport> {
    let started = Instant::now();
    let run = Arc::new(Run {
        scenario: args.scenario,
        query: args.query.clone(),
        tags: expand_tags(&args.tags),
        signatures: if args.sign {
            vec![service_client::Signature {
                user: target.user.clone(),
                password: target.password.clone(),
                meaning: service_client::SignatureMeaning::Performed.into(),
            }]
        } else {
            Vec::new()
        },
        measure_from: started + args.warmup,
        remaining: args
            .count
            .map(|count| AtomicI64::new(i64::try_from(count).unwrap_or(i64::MAX))),
        done: AtomicU64::new(0),
        stop: CancellationToken::new(),
    });
    let workers = clients.len() * args.in_flight;
    // Open loop: each worker sends on its own schedule, offset so the whole load is even.
    let interval = args
        .rate
        .map(|rate| Duration::from_secs_f64(workers as f64 / rate));
    let mut tasks = tokio::task::JoinSet::new();
    for (index, client) in clients
        .iter()
        .flat_map(|client| std::iter::repeat_n(client, args.in_flight))
        .enumerate()
    {
        let (run, client) = (Arc::clone(&run), client.clone());
        let offset = interval.map(|interval| interval.mul_f64(index as f64 / workers as f64));
        tasks.spawn(async move { worker(run, client, interval, offset).await });
    }
    let progress = Progress::start(args.warmup + measure_for);
    let deadline = tokio::time::Instant::from_std(run.measure_from + measure_for);
    tokio::select! {
        () = tokio::time::sleep_until(deadline) => run.stop.cancel(),
        () = run.stop.cancelled() => {}
        () = progress.tick(&run.done) => {}
    }
    let measured_until = Instant::now();
    let mut tally = setup;
    while let Some(joined) = tasks.join_next().await {
        tally.merge(joined.context("a load worker failed")??);
    }
    progress.finish();
    Ok(tally.into_report(
        args,
        measured_until.saturating_duration_since(run.measure_from),
        clients.len(),
    ))
}

/// One caller: closed loop without `interval`, open loop (fixed schedule) with it.
async fn worker(
    run: Arc<Run>,
    client: Client,
    interval: Option<Duration>,
    offset: Option<Duration>,
) -> anyhow::Result<Tally> {
    let mut tally = Tally::new()?;
    let schedule_start = Instant::now() + offset.unwrap_or_default();
    let mut sent: u32 = 0;
    loop {
        // In open loop a call's latency runs from when it should have been sent when the
        // worker was still busy with the previous call at that time (the server's delay), and
        // from when it was sent when the worker was waiting for its slot (tokio's timer wakes
        // up to a millisecond late, which is not the server's doing).
        let start = match interval {
            Some(interval) => {
                let at = schedule_start + interval.saturating_mul(sent);
                sent = sent.saturating_add(1);
                if Instant::now() < at {
                    tokio::select! {
                        () = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => {}
                        () = run.stop.cancelled() => break,
                    }
                    Instant::now()
                } else {
                    at
                }
            }
            None => Instant::now(),
        };
        if !run.may_send(start) {
            break;
        }
        let (outcome, milestone, ended) = run.call(&client).await;
        if start >= run.measure_from {
            if let Some(milestone) = milestone {
                let nanos = u64::try_from(milestone.as_nanos()).unwrap_or(u64::MAX);
                tally.milestone.saturating_record(nanos.max(1));
            }
            tally.record(ended.duration_since(start), outcome);
            run.done.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(tally)
}

/// A progress bar on a terminal; nothing otherwise.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn start(total: Duration) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(u64::try_from(total.as_millis()).unwrap_or(u64::MAX));
            bar.set_style(
                indicatif::ProgressStyle::with_template("{bar:40} {elapsed}/{duration} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
        Self { bar }
    }

    /// Updates the bar until cancelled by the caller's `select!`.
    async fn tick(&self, done: &AtomicU64) {
        let started = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if let Some(bar) = &self.bar {
                bar.set_position(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
                bar.set_message(format!("{} calls", done.load(Ordering::Relaxed)));
            }
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
