//! Test fixtures: a real `tserver` on 127.0.0.1:0 over a real SQLite solution file, real
//! clients, and a raw frame connection for speaking bad protocol on purpose.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use service_client::{Client, ClientOptions};
use tempfile::TempDir;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;
use tserver::cli::{Cli, run_admin};
use tserver::{Runtime, Server, ServerConfig};
use tserver_proto::v1::{ClientFrame, Hello, ServerFrame, client_frame};
use tserver_proto::{DEFAULT_MAX_FRAME, Decoded, FrameCodec, PROTOCOL_VERSION};

/// Longest any test waits for something that should happen at once.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

/// A demo solution in a temporary directory.
pub(crate) struct Solution {
    /// Keeps the directory alive.
    _dir: TempDir,
    /// The solution file.
    pub(crate) path: PathBuf,
}

impl Solution {
    /// `tserver init PATH --demo`, with the demo plant's documents beside the file (where a
    /// plant file written beside it finds them, as the demo's own file does in the repository).
    pub(crate) fn demo() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("plant.db");
        admin(&["init", path.to_str().expect("utf-8 path"), "--demo"], "");
        let procedures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/plants/procedures");
        std::fs::create_dir(dir.path().join("procedures")).expect("makes the documents' folder");
        for entry in std::fs::read_dir(&procedures).expect("the demo's documents") {
            let entry = entry.expect("a document");
            std::fs::copy(
                entry.path(),
                dir.path().join("procedures").join(entry.file_name()),
            )
            .expect("copies a document");
        }
        Self { _dir: dir, path }
    }

    /// Its plant as `tserver plant PATH export` writes it.
    pub(crate) fn plant_model(&self) -> plant_model::PlantModel {
        let path = self.path.to_str().expect("utf-8");
        let exported = admin(&["plant", path, "export"], "");
        plant_model::read(&exported, plant_model::Format::Toml, "demo").expect("reads")
    }

    /// `tserver init PATH`: no plant, no users.
    pub(crate) fn empty() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("plant.db");
        admin(&["init", path.to_str().expect("utf-8 path")], "");
        Self { _dir: dir, path }
    }

    /// An empty solution with the plant file `text` imported (written beside it).
    pub(crate) fn with_plant(text: &str) -> Self {
        let solution = Self::empty();
        let file = solution.path.with_file_name("plant.toml");
        std::fs::write(&file, text).expect("writes the plant");
        admin(
            &[
                "plant",
                solution.path.to_str().expect("utf-8"),
                "import",
                file.to_str().expect("utf-8"),
            ],
            "",
        );
        solution
    }

    /// `tserver users PATH add NAME --role ROLE`, with `password`.
    pub(crate) fn add_user(&self, name: &str, role: &str, password: &str) {
        let path = self.path.to_str().expect("utf-8");
        admin(
            &["users", path, "add", name, "--role", role],
            &format!("{password}\n"),
        );
    }
}

/// How the alarm named `alarm` stands now, as ISA-18.2 names it to an operator (`active`,
/// `shelved`, `suppressed`, ...).
pub(crate) fn alarm_label(runtime: &Runtime, alarm: &str) -> &'static str {
    runtime
        .objects()
        .alarms()
        .iter()
        .find(|known| known.definition().name == alarm)
        .expect("the alarm")
        .status()
        .label()
}

/// Runs a `tserver` admin command in process, as the binary would, and returns its stdout.
pub(crate) fn admin(args: &[&str], stdin: &str) -> String {
    try_admin(args, stdin).expect("admin command succeeds")
}

/// Like [`admin`], returning the error.
pub(crate) fn try_admin(args: &[&str], stdin: &str) -> anyhow::Result<String> {
    use clap::Parser;
    let cli = Cli::try_parse_from(std::iter::once("tserver").chain(args.iter().copied()))?;
    let mut output = Vec::new();
    run_admin(&cli.command, &mut stdin.as_bytes(), &mut output)?;
    Ok(String::from_utf8(output).expect("utf-8 output"))
}

/// Stores one `ModelSettings` key as it is, bypassing the admin command's checks: a value a
/// hand edit or an older build may have left, which calls must survive.
pub(crate) fn store_setting_unchecked(solution: &Path, key: &str, value: &str) {
    let connection = rusqlite::Connection::open(solution).expect("opens");
    connection
        .execute(
            "UPDATE SolutionSettings SET ModelSettings = json_set(COALESCE(ModelSettings, '{}'), '$.' || ?1, ?2)",
            [key, value],
        )
        .expect("stored");
}

/// A running server.
pub(crate) struct TestServer {
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    /// Its runtime (the same one it serves).
    pub(crate) runtime: Runtime,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

impl TestServer {
    /// Serves `solution` with `config`.
    pub(crate) async fn start(solution: &Path, config: ServerConfig) -> Self {
        Self::serving(Runtime::open(solution).expect("solution opens"), config).await
    }

    /// Serves the solution at `location` (a file or a `postgres://` URL) with `config`.
    pub(crate) async fn start_at(location: &str, config: ServerConfig) -> Self {
        let location = location.parse().expect("a solution location");
        let runtime = Runtime::open_at(&location).await.expect("solution opens");
        Self::serving(runtime, config).await
    }

    async fn serving(runtime: Runtime, config: ServerConfig) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let shutdown = CancellationToken::new();
        let server = Server::new(runtime.clone(), config).expect("server");
        let task = tokio::spawn(server.run(listener, shutdown.clone()));
        Self {
            addr,
            runtime,
            shutdown,
            task,
        }
    }

    /// A connected client, not logged in.
    pub(crate) async fn client(&self) -> Client {
        Client::connect(self.addr, ClientOptions::default())
            .await
            .expect("connects")
    }

    /// A client logged in as the demo's passwordless `guest`.
    pub(crate) async fn guest(&self) -> Client {
        let client = self.client().await;
        client.login("guest", "").await.expect("guest logs in");
        client
    }

    /// Starts a graceful shutdown without waiting for it.
    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Shuts down and waits until the server has stopped, proving it stops.
    pub(crate) async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(PATIENCE, self.task)
            .await
            .expect("server stops within the patience")
            .expect("server task did not panic");
    }
}

/// A raw frame connection, for speaking the protocol (or not) byte by byte.
pub(crate) struct RawConnection {
    framed: Framed<TcpStream, FrameCodec<ServerFrame, ClientFrame>>,
}

impl RawConnection {
    /// Connects without logging in.
    pub(crate) async fn connect(addr: SocketAddr) -> Self {
        let socket = TcpStream::connect(addr).await.expect("connects");
        Self {
            framed: Framed::new(socket, FrameCodec::new(DEFAULT_MAX_FRAME)),
        }
    }

    /// Connects from `source` (a loopback address other than 127.0.0.1 is another client).
    pub(crate) async fn connect_from(source: std::net::IpAddr, addr: SocketAddr) -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
        socket
            .bind(SocketAddr::new(source, 0))
            .expect("binds the source address");
        let socket = socket.connect(addr).await.expect("connects");
        Self {
            framed: Framed::new(socket, FrameCodec::new(DEFAULT_MAX_FRAME)),
        }
    }

    /// Connects and logs in as `guest`.
    pub(crate) async fn guest(addr: SocketAddr) -> Self {
        let mut connection = Self::connect(addr).await;
        connection.send(1, hello("guest", "")).await;
        let reply = connection.receive().await.expect("hello reply");
        assert!(matches!(
            reply.body,
            Some(tserver_proto::v1::server_frame::Body::Hello(_))
        ));
        connection
    }

    /// Sends one call.
    pub(crate) async fn send(&mut self, call_id: u64, body: client_frame::Body) {
        self.framed
            .send(ClientFrame {
                call_id,
                body: Some(body),
            })
            .await
            .expect("frame sent");
    }

    /// Shuts the sending side (`shutdown(SHUT_WR)`, as `printf ... | nc` does), keeping the
    /// receiving side open for replies.
    pub(crate) async fn shutdown_write(&mut self) {
        self.framed
            .get_mut()
            .shutdown()
            .await
            .expect("shut down the sending side");
    }

    /// Sends raw bytes as they are.
    pub(crate) async fn send_bytes(&mut self, bytes: &[u8]) {
        self.framed.get_mut().write_all(bytes).await.expect("bytes sent");
    }

    /// The next frame, or `None` once the server has closed the connection.
    pub(crate) async fn receive(&mut self) -> Option<ServerFrame> {
        match tokio::time::timeout(PATIENCE, self.framed.next()).await {
            Ok(Some(Ok(Decoded::Message(frame)))) => Some(frame),
            Ok(Some(Ok(Decoded::Malformed(error)))) => panic!("server sent a malformed frame: {error}"),
            Ok(Some(Err(_)) | None) => None,
            Err(_) => panic!("no frame and no close within {PATIENCE:?}"),
        }
    }
}

/// A Hello body for protocol version 1.
pub(crate) fn hello(user: &str, password: &str) -> client_frame::Body {
    client_frame::Body::Hello(Hello {
        protocol_version: PROTOCOL_VERSION,
        client_name: "tests".into(),
        user_name: user.into(),
        password: password.into(),
    })
}

/// The error code and message of an error frame; panics on anything else.
pub(crate) fn error_of(frame: &ServerFrame) -> (tserver_proto::v1::ErrorCode, &str) {
    match &frame.body {
        Some(tserver_proto::v1::server_frame::Body::Error(error)) => (
            tserver_proto::v1::ErrorCode::try_from(error.code).expect("known code"),
            error.message.as_str(),
        ),
        other => panic!("expected an error frame, got {other:?}"),
    }
}

/// `tserver serve` as a separate process (the real command line), for tests that measure the
/// server's own memory or set its environment. Killed when dropped.
pub(crate) struct ServerProcess {
    child: std::process::Child,
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    log: std::sync::Arc<std::sync::Mutex<ServerLog>>,
}

/// What a server process wrote to its log (stderr): every byte counted, the first lines kept.
#[derive(Debug, Default, Clone)]
pub(crate) struct ServerLog {
    /// Bytes written, line ends included.
    pub(crate) bytes: usize,
    /// The first [`KEPT_LOG_LINES`] lines.
    pub(crate) lines: Vec<String>,
}

/// How many log lines a [`ServerProcess`] keeps for assertions.
const KEPT_LOG_LINES: usize = 20_000;

impl ServerProcess {
    /// Starts `tserver serve --solution PATH --listen 127.0.0.1:0` plus `extra` options, with
    /// `env` added to its environment, and waits for its "listening" log line.
    pub(crate) fn start(solution: &Path, extra: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_command(
            std::process::Command::new(env!("CARGO_BIN_EXE_tserver-under-test")),
            solution,
            extra,
            env,
        )
    }

    /// As [`Self::start`], under an open-file limit (soft and hard) of `open_files`.
    pub(crate) fn start_with_open_files(solution: &Path, extra: &[&str], open_files: u64) -> Self {
        Self::start_command(limited_open_files(open_files), solution, extra, &[])
    }

    fn start_command(
        mut command: std::process::Command,
        solution: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        use std::io::BufRead;
        let mut child = command
            .args(["serve", "--solution"])
            .arg(solution)
            .args(["--listen", "127.0.0.1:0", "--simulator", "off"])
            .args(extra)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("tserver starts");
        let stderr = child.stderr.take().expect("stderr");
        let (found, addr) = std::sync::mpsc::channel();
        let log = std::sync::Arc::new(std::sync::Mutex::new(ServerLog::default()));
        // The reader keeps draining the log after the address line, so the server never
        // blocks on a full pipe.
        let kept = std::sync::Arc::clone(&log);
        std::thread::spawn(move || {
            let mut found = Some(found);
            for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(address) = listening_address(&line)
                    && let Some(found) = found.take()
                {
                    let _ = found.send(address);
                }
                if let Ok(mut log) = kept.lock() {
                    log.bytes += line.len() + 1;
                    if log.lines.len() < KEPT_LOG_LINES {
                        log.lines.push(line);
                    }
                }
            }
        });
        let addr = match addr.recv_timeout(PATIENCE) {
            Ok(addr) => addr.parse().expect("a socket address"),
            // The server ended or hung before listening: what it said is the reason.
            Err(error) => {
                let said = log.lock().map(|log| log.lines.join("\n")).unwrap_or_default();
                panic!("tserver did not log its address ({error}); it said:\n{said}");
            }
        };
        Self { child, addr, log }
    }

    /// What the server has logged so far.
    pub(crate) fn log(&self) -> ServerLog {
        self.log.lock().map(|log| log.clone()).unwrap_or_default()
    }

    /// Waits (at most [`PATIENCE`]) until the log holds `count` lines containing `text`.
    pub(crate) fn until_logged_times(&self, text: &str, count: usize) {
        let deadline = std::time::Instant::now() + PATIENCE;
        while self.log().lines.iter().filter(|line| line.contains(text)).count() < count {
            assert!(
                std::time::Instant::now() < deadline,
                "not {count} {text:?} in the log:\n{}",
                self.log().lines.join("\n")
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Waits (at most [`PATIENCE`]) until the log holds a line containing `text`.
    pub(crate) fn until_logged(&self, text: &str) {
        self.until_logged_times(text, 1);
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// `tserver-under-test` run by `sh` under an open-file limit (soft and hard) of `open_files`;
/// arguments added to the command go to tserver.
pub(crate) fn limited_open_files(open_files: u64) -> std::process::Command {
    let mut command = std::process::Command::new("sh");
    command
        .arg("-c")
        .arg(format!("ulimit -n {open_files} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_tserver-under-test"));
    command
}

/// The address of a "listening" log line, in text (`... listening address=ADDR`) or JSON.
fn listening_address(line: &str) -> Option<String> {
    if line.starts_with('{') {
        let event: serde_json::Value = serde_json::from_str(line).ok()?;
        return (event["message"] == "listening")
            .then(|| event["address"].as_str().map(str::to_owned))
            .flatten();
    }
    line.contains("listening")
        .then(|| line.split("address=").nth(1))
        .flatten()
        .map(|address| address.trim().to_owned())
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Acknowledges `alarm` as the operator `user` through the acting path (audited, as the
/// server's AcknowledgeAlarm does): whether it had anything to acknowledge.
pub(crate) async fn acknowledge(
    runtime: &Runtime,
    alarm: &str,
    user: &str,
) -> Result<bool, plant::actions::ActError> {
    let operator = plant::actions::Actor::User {
        name: user.into(),
        role: store::Role::Operator,
        connection: "test".to_owned(),
        peer: "local".to_owned(),
    };
    let act = plant::actions::AcknowledgeAlarm::unsigned(alarm);
    runtime.act_now(operator, act).await
}

/// Who acknowledged `alarm` since it last tripped, as the live plant says.
pub(crate) fn acknowledged_by(runtime: &Runtime, alarm: &str) -> Option<String> {
    runtime
        .objects()
        .alarms()
        .iter()
        .find(|known| known.definition().name == alarm)
        .and_then(|known| known.status().acknowledged)
        .map(|(_, user)| user)
}
