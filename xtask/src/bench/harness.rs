//! What every scenario runs against: the built binaries, the bench solution, the servers
//! (tserver and the reference server) and `tclient bench`, the load client that drives them.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::processes::{Process, run_quietly, wait_for_port_within};

/// A server under measurement: where it listens and its process id (for its CPU time).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measured<'a> {
    pub(crate) addr: &'a str,
    pub(crate) pid: u32,
}

/// Everything one run needs: binaries, output directory, the solution, the servers.
#[derive(Debug)]
pub(crate) struct Bench {
    pub(crate) bin: PathBuf,
    pub(crate) out_dir: PathBuf,
    pub(crate) solution: PathBuf,
    pub(crate) tserver_addr: String,
    pub(crate) tserver_pid: u32,
    pub(crate) reference_addr: String,
    pub(crate) reference_pid: u32,
    /// How long a timed scenario runs, and its warm-up (`tclient bench` durations).
    pub(crate) duration: &'static str,
    pub(crate) warmup: &'static str,
}

impl Bench {
    pub(crate) fn tool(&self, name: &str) -> PathBuf {
        self.bin.join(name)
    }

    pub(crate) fn reference(&self) -> Measured<'_> {
        Measured {
            addr: &self.reference_addr,
            pid: self.reference_pid,
        }
    }

    /// Sets a setting of the bench solution (tserver reads settings at every call).
    pub(crate) fn settings(&self, key: &str, value: &str) -> anyhow::Result<()> {
        let solution = self.solution.to_str().context("a UTF-8 solution path")?;
        run_quietly(&self.tool("tserver"), &["settings", solution, "set", key, value])
    }

    /// Runs `tclient bench` and returns its JSON report.
    pub(crate) fn client(&self, addr: &str, args: &[&str]) -> anyhow::Result<Value> {
        tclient_bench(&self.bin, addr, args)
    }

    /// The arguments of `scenario` on `connections` connections for the plan's duration after
    /// its warm-up, then `extra`.
    pub(crate) fn timed(&self, scenario: &str, connections: usize, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = vec![
            scenario.to_owned(),
            "-c".to_owned(),
            connections.to_string(),
            "-d".to_owned(),
            self.duration.to_owned(),
            "--warmup".to_owned(),
            self.warmup.to_owned(),
        ];
        args.extend(extra.iter().map(|&arg| arg.to_owned()));
        args
    }
}

/// Runs `tclient bench ARGS --json` against `addr` and returns its JSON report.
pub(crate) fn tclient_bench(bin: &Path, addr: &str, args: &[&str]) -> anyhow::Result<Value> {
    tclient_bench_as(bin, addr, ("guest", ""), args)
}

/// As [`tclient_bench`], logged in as `user` with `password`.
pub(crate) fn tclient_bench_as(
    bin: &Path,
    addr: &str,
    (user, password): (&str, &str),
    args: &[&str],
) -> anyhow::Result<Value> {
    let output = Command::new(bin.join("tclient"))
        .args(["--addr", addr, "--user", user, "--timeout-secs", "30", "bench"])
        .env("TCLIENT_PASSWORD", password)
        .args(args)
        .arg("--json")
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run tclient")?;
    if !output.status.success() {
        bail!("tclient bench {args:?} failed");
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// Starts `tserver serve` on `solution` at `addr` as the bench runs it ([`tserver_command`]),
/// its log in `log`; returns once both listeners accept connections.
pub(crate) fn serve(
    bin: &Path,
    solution: &Path,
    addr: &str,
    http: &str,
    extra: &[&str],
    log: std::fs::File,
) -> anyhow::Result<Process> {
    let mut command = tserver_command(bin, solution, addr, http, extra);
    start_serving(command.stderr(log), addr, http, Duration::from_secs(20))
}

/// `tserver serve` on `solution` at `addr` as the bench runs it: simulator off, room for the
/// idle connections, RuntimeMCP at `http` with no request limit for the bench's token, `extra`
/// options.
pub(crate) fn tserver_command(
    bin: &Path,
    solution: &Path,
    addr: &str,
    http: &str,
    extra: &[&str],
) -> Command {
    let mut command = Command::new(bin.join("tserver"));
    command
        .arg("serve")
        .arg("--solution")
        .arg(solution)
        .args(["--listen", addr, "--max-connections", "12000"])
        // The simulator stays off unless a scenario turns it on.
        .args(if extra.contains(&"--simulator") {
            &[][..]
        } else {
            &["--simulator", "off"][..]
        })
        .args(["--max-calls-in-flight", "64"])
        // Every client of the bench is one address and one user: the quotas that keep one
        // client from taking a server's WebSockets would cap what is measured here.
        .args([
            "--max-websockets-per-address",
            "12000",
            "--max-websockets-per-user",
            "12000",
        ])
        .args(["--http", http, "--http-requests-per-second", "100000000"])
        .args(extra)
        .env("RUST_LOG", "warn");
    command
}

/// Spawns `command`, a tserver listening at `addr` and `http`; returns once both accept
/// connections, or fails after `within`.
pub(crate) fn start_serving(
    command: &mut Command,
    addr: &str,
    http: &str,
    within: Duration,
) -> anyhow::Result<Process> {
    let process = Process {
        name: "tserver",
        child: command
            .stdout(Stdio::null())
            .spawn()
            .context("cannot start tserver")?,
    };
    wait_for_port_within(addr.parse()?, within)?;
    wait_for_port_within(http.parse()?, within)?;
    Ok(process)
}

/// A new solution `NAME.db` in `out_dir` (the demo's users and settings) whose plant is
/// `plant` (the demo's when none), made by `bin`'s tserver, replacing one a run before left;
/// its path.
pub(crate) fn fresh_solution(
    bin: &Path,
    out_dir: &Path,
    name: &str,
    plant: Option<&str>,
) -> anyhow::Result<PathBuf> {
    let tserver = bin.join("tserver");
    let solution = out_dir.join(format!("{name}.db"));
    for suffix in ["", ".key", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", solution.display()));
    }
    let path = solution.to_str().context("the bench directory is not UTF-8")?;
    run_quietly(&tserver, &["init", path, "--demo"])?;
    if let Some(plant) = plant {
        let plant_file = out_dir.join(format!("{name}-plant.toml"));
        std::fs::write(&plant_file, plant)?;
        let plant_path = plant_file.to_str().context("a UTF-8 plant path")?;
        run_quietly(&tserver, &["plant", path, "import", plant_path])?;
    }
    Ok(solution)
}

/// A RuntimeMCP token of the demo's `guest` on `solution`, made by `bin`'s tserver.
pub(crate) fn mcp_token(bin: &Path, solution: &Path) -> anyhow::Result<String> {
    let solution = solution.to_str().context("a UTF-8 solution path")?;
    let output = Command::new(bin.join("tserver"))
        .args(["tokens", solution, "create", "--user", "guest", "--name", "bench"])
        .stderr(Stdio::null())
        .output()
        .context("cannot run tserver tokens")?;
    if !output.status.success() {
        bail!("tserver tokens create failed");
    }
    Ok(String::from_utf8(output.stdout)?.trim().to_owned())
}

/// A stand-in model's counters, read over HTTP.
pub(crate) fn llm_stats(url: &str) -> anyhow::Result<scripted_llm::Stats> {
    use std::io::{Read, Write};
    let authority = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .context("not an http URL")?;
    let mut stream = TcpStream::connect(authority)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET {} HTTP/1.1\r\nhost: {authority}\r\nconnection: close\r\n\r\n",
        scripted_llm::STATS_PATH
    )?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    let body = reply.split("\r\n\r\n").nth(1).context("no body")?;
    scripted_llm::Stats::from_json(&serde_json::from_str(body)?).context("not stats")
}

/// Opens `solution` in process and starts its sources; returns once its first source has read
/// `values` values (at most 120 s). The sources stop with the token.
pub(crate) async fn source_reading(
    solution: &Path,
    values: u64,
) -> anyhow::Result<(tserver::Runtime, tokio_util::sync::CancellationToken)> {
    let plant = tserver::Runtime::open(solution)?;
    let shutdown = tokio_util::sync::CancellationToken::new();
    plant.start_sources(&shutdown).await?;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let status = plant
            .source_statuses()
            .into_iter()
            .next()
            .context("the bench source")?;
        if status.messages >= values {
            return Ok((plant, shutdown));
        }
        if std::time::Instant::now() > deadline {
            bail!(
                "the source read {} of {values} values in 120 s: {status:?}",
                status.messages
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
