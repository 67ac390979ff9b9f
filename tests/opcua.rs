//! A real OPC UA server for the tests: the `opcua-server-under-test` program (async-opcua's
//! server) in a process of its own on a free loopback port, so a test can kill it (SIGKILL),
//! stall it (SIGSTOP, SIGCONT) and start it again on the same port with the same certificate;
//! it serves garbage on demand and, started with load variables, floods them with changes
//! (the tests' flood, the benchmark's stream). What it serves is named here, for the program
//! and the tests alike.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// The namespace of the served variables.
pub const NAMESPACE_URI: &str = "urn:tserver-tests";
/// The folder (under Objects) holding them; its node id is `ns=<idx>;s=Line1`.
pub const FOLDER: &str = "Line1";
/// A Double that changes every 100 ms.
pub const TEMP: &str = "Line1.Temp";
/// An Int32 counting up every 100 ms.
pub const COUNT: &str = "Line1.Count";
/// A Boolean, true.
pub const RUNNING: &str = "Line1.Running";
/// A Double clients may write; it keeps what was written, of whatever type.
pub const SETPOINT: &str = "Line1.Setpoint";
/// A String, [`NAME_VALUE`].
pub const NAME: &str = "Line1.Name";
/// What [`NAME`] holds.
pub const NAME_VALUE: &str = "Line 1";
/// A Double whose status follows [`FlakyStatus`] (Good, Uncertain, Bad in turn by default).
pub const FLAKY: &str = "Line1.Flaky";
/// A Double with a numeric node id: `ns=<idx>;i=1001`, holding [`NUMERIC_VALUE`].
pub const NUMERIC_ID: u32 = 1001;
/// What the numeric-id variable holds.
pub const NUMERIC_VALUE: f64 = 1.5;
/// A Double with a GUID node id: `ns=<idx>;g=<this>`, holding [`GUID_VALUE`].
pub const GUID_ID: &str = "72962b91-fa75-4ae6-8d28-b404dc7daf63";
/// What the GUID-id variable holds.
pub const GUID_VALUE: f64 = 2.5;
/// A Double with an opaque node id of these bytes (`ns=<idx>;b=<base64>`, see
/// [`OpcUaServer::opaque_node`]), holding [`OPAQUE_VALUE`].
pub const OPAQUE_BYTES: &[u8] = b"Line1-Level";
/// What the opaque-id variable holds.
pub const OPAQUE_VALUE: f64 = 3.5;
/// A Double holding [`GARBAGE_VALUE`], or what [`Garbage`] says.
pub const GARBAGE: &str = "Line1.Garbage";
/// What [`GARBAGE`] holds while it is [`Garbage::None`].
pub const GARBAGE_VALUE: f64 = 3.5;
/// The folder (under Objects) of the load variables: `ns=<idx>;s=Load`.
pub const LOAD_FOLDER: &str = "Load";

/// The name of load variable `index` (a Double, 0 until a load changes it): `Load.V00042`.
pub fn load_variable(index: usize) -> String {
    format!("{LOAD_FOLDER}.V{index:05}")
}

/// What load variable `index` holds once a load is over: its index, far below the times a
/// load writes.
pub fn load_final_value(index: usize) -> f64 {
    index as f64
}

/// What [`GARBAGE`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Garbage {
    /// [`GARBAGE_VALUE`], a good Double.
    None,
    /// NaN.
    NaN,
    /// A String where a Double belongs.
    Text,
}

impl Garbage {
    /// The word for it on the program's standard input (`garbage <word>`).
    pub fn word(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::NaN => "nan",
            Self::Text => "text",
        }
    }

    /// The garbage of `word`, as [`Garbage::word`] writes it.
    pub fn from_word(word: &str) -> Option<Self> {
        [Self::None, Self::NaN, Self::Text]
            .into_iter()
            .find(|garbage| garbage.word() == word)
    }
}

/// The status [`FLAKY`]'s value carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlakyStatus {
    /// Good, Uncertain, Bad in turn, one second each.
    Cycle,
    /// Good only.
    Good,
    /// Uncertain (last usable value) only.
    Uncertain,
    /// Bad (no communication) only.
    Bad,
}

impl FlakyStatus {
    /// The word for it on the program's standard input (`flaky <word>`).
    pub fn word(self) -> &'static str {
        match self {
            Self::Cycle => "cycle",
            Self::Good => "good",
            Self::Uncertain => "uncertain",
            Self::Bad => "bad",
        }
    }

    /// The status of `word`, as [`FlakyStatus::word`] writes it.
    pub fn from_word(word: &str) -> Option<Self> {
        [Self::Cycle, Self::Good, Self::Uncertain, Self::Bad]
            .into_iter()
            .find(|status| status.word() == word)
    }
}

/// How a test's server runs: its program and the user it accepts on every endpoint (anonymous
/// users only on the unsecured one).
#[derive(Debug, Clone)]
pub struct OpcUaServerOptions {
    /// The `opcua-server-under-test` program; integration tests pass
    /// `env!("CARGO_BIN_EXE_opcua-server-under-test")` (Cargo tells only them where it is).
    pub program: PathBuf,
    /// The user name clients may sign in with.
    pub user: String,
    /// Its password.
    pub password: String,
    /// How many load variables it serves ([`load_variable`]); 0: none.
    pub load_variables: usize,
}

impl OpcUaServerOptions {
    /// Runs `program` with user `operator`, password `secret`, no load variables.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            user: "operator".to_owned(),
            password: "secret".to_owned(),
            load_variables: 0,
        }
    }
}

/// An OPC UA server process of this test.
#[derive(Debug)]
pub struct OpcUaServer {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    options: OpcUaServerOptions,
    port: u16,
    namespace_index: u16,
    dir: tempfile::TempDir,
}

/// How long the program may take to listen (the first start makes an RSA key pair).
const START_WITHIN: Duration = Duration::from_secs(60);

impl OpcUaServer {
    /// Starts the server on a free loopback port with a new PKI directory and waits until it
    /// accepts connections.
    pub fn start(options: OpcUaServerOptions) -> Self {
        assert!(
            options.program.exists(),
            "{} is missing: build it with `cargo build -p tserver-tests --bins`",
            options.program.display()
        );
        let mut server = Self {
            child: None,
            stdin: None,
            options,
            port: 0,
            namespace_index: 0,
            dir: tempfile::tempdir().expect("temp dir"),
        };
        server.launch();
        server
    }

    /// Runs the program on `self.port` (0: a port it picks) and waits for its line saying where
    /// it listens.
    fn launch(&mut self) {
        let log = self.dir.path().join("server.log");
        let mut child = Command::new(&self.options.program)
            .arg("--port")
            .arg(self.port.to_string())
            .arg("--pki-dir")
            .arg(self.pki_dir())
            .arg("--user")
            .arg(&self.options.user)
            .arg("--password")
            .arg(&self.options.password)
            .arg("--load")
            .arg(self.options.load_variables.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("creates the server log"))
            .spawn()
            .unwrap_or_else(|error| panic!("{} starts: {error}", self.options.program.display()));
        let stdout = child.stdout.take().expect("piped stdout");
        self.stdin = child.stdin.take();
        self.child = Some(child);
        // Read on a thread of its own, so a program that never says a word fails the test in
        // bounded time rather than hanging it.
        let (said, heard) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = said.send(line);
        });
        let line = heard.recv_timeout(START_WITHIN).unwrap_or_else(|_| {
            panic!(
                "the OPC UA server said nothing within {START_WITHIN:?}; its log: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        });
        let (port, namespace_index) = parse_listening(&line).unwrap_or_else(|| {
            panic!(
                "the OPC UA server did not start: {line:?}; its log: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        });
        assert!(
            self.port == 0 || self.port == port,
            "the server listens on {port}, not on {}",
            self.port
        );
        self.port = port;
        self.namespace_index = namespace_index;
        let deadline = Instant::now() + START_WITHIN;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the OPC UA server did not accept connections on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the process (SIGKILL): its clients see their connections drop, unannounced.
    pub fn kill(&mut self) {
        self.stdin = None;
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again (killing it first if it runs) on the same port with the same PKI
    /// directory, so it has the same certificate.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    /// Sets the status [`FLAKY`]'s value carries.
    pub fn set_flaky(&mut self, status: FlakyStatus) {
        self.command(&format!("flaky {}", status.word()));
    }

    /// Sets what [`GARBAGE`] holds.
    pub fn set_garbage(&mut self, garbage: Garbage) {
        self.command(&format!("garbage {}", garbage.word()));
    }

    /// Starts a load: `rate` changes a second spread over the load variables in turn, each
    /// value the time it was set (microseconds since the Unix epoch), `rate * seconds` changes
    /// in all; then every variable is set to its [`load_final_value`]. A load already running
    /// stops first.
    pub fn load(&mut self, rate: u32, seconds: f64) {
        self.command(&format!("load {rate} {seconds}"));
    }

    fn command(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("the server is running");
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .expect("the server takes the command");
    }

    /// Stops the process (SIGSTOP): its connections stay open and nothing answers, as a server
    /// that stalls mid-response.
    pub fn pause(&mut self) {
        self.signal("-STOP");
    }

    /// Lets a paused process go on (SIGCONT).
    pub fn resume(&mut self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("the server is running");
        let status = Command::new("kill")
            .arg(signal)
            .arg(child.id().to_string())
            .status()
            .expect("kill (procps or util-linux) runs");
        assert!(status.success(), "kill {signal} {} failed", child.id());
    }

    /// Where clients connect: `opc.tcp://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("opc.tcp://127.0.0.1:{}/", self.port)
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The index of [`NAMESPACE_URI`] on this server.
    pub fn namespace_index(&self) -> u16 {
        self.namespace_index
    }

    /// Its PKI directory: its certificate in `own/cert.der`, its key in `private/`, client
    /// certificates it trusted in `trusted/`.
    pub fn pki_dir(&self) -> PathBuf {
        self.dir.path().join("pki")
    }

    /// The user name and password it accepts.
    pub fn credentials(&self) -> (&str, &str) {
        (&self.options.user, &self.options.password)
    }

    /// The node id of `name` (one of the `Line1.*` names above) as text: `ns=<idx>;s=<name>`.
    pub fn node(&self, name: &str) -> String {
        format!("ns={};s={name}", self.namespace_index)
    }

    /// The node id of the opaque-id variable as text: `ns=<idx>;b=<base64>`.
    pub fn opaque_node(&self) -> String {
        opcua::types::NodeId::new(
            self.namespace_index,
            opcua::types::ByteString::from(OPAQUE_BYTES.to_vec()),
        )
        .to_string()
    }
}

impl Drop for OpcUaServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The line the program prints once it listens.
pub fn listening_line(port: u16, namespace_index: u16) -> String {
    format!("listening opc.tcp://127.0.0.1:{port}/ ns={namespace_index}")
}

/// The port and namespace index of a [`listening_line`].
fn parse_listening(line: &str) -> Option<(u16, u16)> {
    let rest = line.trim().strip_prefix("listening opc.tcp://127.0.0.1:")?;
    let (port, rest) = rest.split_once("/ ns=")?;
    Some((port.parse().ok()?, rest.parse().ok()?))
}

/// The server's certificate (DER) in `pki_dir`, once its first start wrote it.
pub fn certificate(pki_dir: &Path) -> Option<Vec<u8>> {
    std::fs::read(pki_dir.join("own").join("cert.der")).ok()
}
