//! `cargo xtask soak`: a bounded mixed load against a production (`dist`) `tserver` for a long
//! time (30 minutes by default), reporting the server's memory over the run and every error.
//!
//! The load: chat turns with a tool call against a 20 ms stand-in model, display clients
//! reading tags, clients that connect, log in and leave, and hostile connections (the six
//! kinds of `tserver_tests::hostile`) from another loopback address, with the plant
//! simulator and historian running. It passes when no well-behaved call failed, the server
//! logged no error, and its memory at the end is within 10% (or 8 MiB) of the memory after
//! warm-up. Results go to `target/soak/results.json`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use service_client::{Client, ClientOptions, Status};

use crate::processes::{Process, free_port, rss_bytes, run_quietly, start_announcing, wait_for_port};

/// Hostile clients beside the well-behaved ones (each reconnecting about once a second).
const HOSTILE: usize = 60;

/// Options of `cargo xtask soak`.
#[derive(Debug, clap::Args)]
pub(crate) struct SoakOptions {
    /// How long the load runs, in minutes (at most a day).
    #[arg(long, value_name = "N", default_value_t = 30.0, value_parser = minutes)]
    minutes: f64,
}

impl SoakOptions {
    /// How long the load runs.
    fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.minutes * 60.0)
    }
}

/// `--minutes`: a number in (0, 1440].
fn minutes(value: &str) -> Result<f64, String> {
    value
        .parse::<f64>()
        .ok()
        .filter(|minutes| *minutes > 0.0 && *minutes <= 24.0 * 60.0)
        .ok_or_else(|| format!("must be a number of minutes in (0, 1440], not {value:?}"))
}

/// What the load did, counted by every task.
#[derive(Debug, Default)]
struct Counters {
    chat_turns: AtomicU64,
    tag_reads: AtomicU64,
    sessions: AtomicU64,
    errors: AtomicU64,
}

impl Counters {
    fn error(&self, what: &str, error: &dyn std::fmt::Display) {
        // Only the first few are printed; all are counted.
        if self.errors.fetch_add(1, Ordering::Relaxed) < 20 {
            eprintln!("soak error ({what}): {error}");
        }
    }
}

/// Runs the soak.
pub(crate) fn run(options: &SoakOptions) -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("xtask has a parent directory")?
        .to_owned();
    let target_dir = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    crate::processes::cargo(&[
        "build",
        "--release",
        "-p",
        "tserver",
        "-p",
        "scripted-llm",
        "--bins",
    ])?;
    let bin = target_dir.join("release");
    let out_dir = target_dir.join("soak");
    std::fs::create_dir_all(&out_dir)?;
    let solution = out_dir.join("soak.db");
    for stale in ["soak.db", "soak.db.key", "soak.db-wal", "soak.db-shm"] {
        let _ = std::fs::remove_file(out_dir.join(stale));
    }
    let tserver = |args: &[&str]| run_quietly(&bin.join("tserver"), args);
    let path = solution.to_str().context("a UTF-8 target path")?;
    tserver(&["init", path, "--demo"])?;
    let (_llm, llm_url) = start_announcing(
        "scripted LLM (20 ms, one tool call per turn)",
        Command::new(bin.join("scripted-llm")).args(["--mode", "tool", "--latency-ms", "20"]),
    )?;
    tserver(&["settings", path, "set", "URL", &llm_url])?;
    tserver(&["settings", path, "set", "ModelEnabled", "true"])?;
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    let log_path = out_dir.join("tserver.log");
    let server = Process {
        name: "tserver",
        child: Command::new(bin.join("tserver"))
            .args(["serve", "--solution", path, "--listen", &addr.to_string()])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_path)?)
            .spawn()
            .context("cannot start tserver")?,
    };
    wait_for_port(addr)?;

    let counters = Arc::new(Counters::default());
    let started = Instant::now();
    let until = started + options.duration();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let attackers = tserver_tests::hostile::spawn(addr, HOSTILE, None, until)?;
    let samples = runtime.block_on(load(addr, Arc::clone(&counters), server.pid(), until));
    if attackers.join().is_err() {
        bail!("the hostile clients' thread panicked");
    }
    drop(server);

    let warmed = samples
        .iter()
        .find(|(at, _)| *at >= options.duration() / 10)
        .or(samples.first())
        .map_or(0, |(_, rss)| *rss);
    let end = samples.last().map_or(0, |(_, rss)| *rss);
    let peak = samples.iter().map(|(_, rss)| *rss).max().unwrap_or(0);
    let allowed = warmed + (warmed / 10).max(8 << 20);
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let logged_errors = log.lines().filter(|line| line.contains(" ERROR ")).count();
    let errors = counters.errors.load(Ordering::Relaxed);
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    println!(
        "soak of {:.1} min: {} chat turns, {} tag reads, {} sessions, {HOSTILE} hostile clients",
        options.duration().as_secs_f64() / 60.0,
        counters.chat_turns.load(Ordering::Relaxed),
        counters.tag_reads.load(Ordering::Relaxed),
        counters.sessions.load(Ordering::Relaxed),
    );
    println!(
        "tserver memory: {:.1} MiB after warm-up, {:.1} MiB at the end, {:.1} MiB at peak (allowed at the end: {:.1} MiB)",
        mib(warmed),
        mib(end),
        mib(peak),
        mib(allowed)
    );
    println!(
        "errors: {errors} from well-behaved calls, {logged_errors} ERROR lines in {}",
        log_path.display()
    );
    let results = json!({
        "minutes": options.duration().as_secs_f64() / 60.0,
        "chatTurns": counters.chat_turns.load(Ordering::Relaxed),
        "tagReads": counters.tag_reads.load(Ordering::Relaxed),
        "sessions": counters.sessions.load(Ordering::Relaxed),
        "hostileClients": HOSTILE,
        "errors": errors,
        "loggedErrors": logged_errors,
        "rssBytes": {"afterWarmUp": warmed, "end": end, "peak": peak},
        "rssSamples": samples.iter().map(|(at, rss)| json!([at.as_secs(), rss])).collect::<Vec<_>>(),
    });
    std::fs::write(
        out_dir.join("results.json"),
        serde_json::to_string_pretty(&results)?,
    )?;
    if errors > 0 || logged_errors > 0 {
        bail!("the soak saw errors");
    }
    if end > allowed {
        bail!(
            "tserver memory grew from {:.1} to {:.1} MiB",
            mib(warmed),
            mib(end)
        );
    }
    Ok(())
}

/// Drives every kind of client until `until`; returns the server's memory sampled every 10 s.
async fn load(addr: SocketAddr, counters: Arc<Counters>, pid: u32, until: Instant) -> Vec<(Duration, u64)> {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..8 {
        tasks.spawn(chatter(addr, Arc::clone(&counters), until));
    }
    for _ in 0..16 {
        tasks.spawn(display(addr, Arc::clone(&counters), until));
    }
    for _ in 0..4 {
        tasks.spawn(visitor(addr, Arc::clone(&counters), until));
    }
    let started = Instant::now();
    let mut samples = Vec::new();
    while Instant::now() < until {
        if let Some(rss) = rss_bytes(pid) {
            samples.push((started.elapsed(), rss));
        }
        tokio::time::sleep(Duration::from_secs(10).min(until.saturating_duration_since(Instant::now())))
            .await;
    }
    if let Some(rss) = rss_bytes(pid) {
        samples.push((started.elapsed(), rss));
    }
    while tasks.join_next().await.is_some() {}
    samples
}

async fn logged_in(addr: SocketAddr) -> Result<Client, service_client::ClientError> {
    let client = Client::connect(addr, ClientOptions::default()).await?;
    client.login("guest", "").await?;
    Ok(client)
}

/// A panel asking the assistant, one turn after another.
async fn chatter(addr: SocketAddr, counters: Arc<Counters>, until: Instant) {
    let client = match logged_in(addr).await {
        Ok(client) => client,
        Err(error) => return counters.error("chat login", &error),
    };
    while Instant::now() < until {
        match client.chat_envelope("How is Pump 1?").await {
            Ok(envelope) if envelope.status == Status::Ok => {
                counters.chat_turns.fetch_add(1, Ordering::Relaxed);
            }
            Ok(envelope) => counters.error(
                "chat",
                &format!("status {:?}: {:?}", envelope.status, envelope.warnings),
            ),
            Err(error) => return counters.error("chat", &error),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A display reading tags twenty times a second.
async fn display(addr: SocketAddr, counters: Arc<Counters>, until: Instant) {
    let client = match logged_in(addr).await {
        Ok(client) => client,
        Err(error) => return counters.error("display login", &error),
    };
    let tags = [
        "Pump1.FlowRate",
        "Pump1.MotorCurrent",
        "Tank1.Level",
        "Pump2.FlowRate",
        "Tank2.Temperature",
    ];
    while Instant::now() < until {
        match client.read_tags(&tags).await {
            Ok(_) => {
                counters.tag_reads.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => return counters.error("read tags", &error),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A client that connects, logs in, pings and leaves, five times a second.
async fn visitor(addr: SocketAddr, counters: Arc<Counters>, until: Instant) {
    while Instant::now() < until {
        let visit = async {
            let client = logged_in(addr).await?;
            client.ping().await?;
            client.logout().await
        };
        match visit.await {
            Ok(()) => {
                counters.sessions.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => counters.error("visit", &error),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
