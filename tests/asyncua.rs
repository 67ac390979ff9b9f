//! A PLC-sized OPC UA server of another implementation than the tests' own: Python's asyncua
//! (`asyncua_plc.py` beside this file), COUNT Double variables under `Plant`. It is how a
//! plant's server looks to the source: many nodes, and publish responses as large as it likes.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

/// How long the server may take to make its variables and listen: a PLC-sized address space
/// takes Python's asyncua about 40 s alone and past 120 s on two cores busy with the rest of
/// the tests. A limit to fail on, not a measure.
const START_WITHIN: Duration = Duration::from_secs(360);

/// The running asyncua server, stopped when dropped.
#[derive(Debug)]
pub struct AsyncuaPlc {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    port: u16,
    namespace: u16,
}

impl AsyncuaPlc {
    /// Starts it with `count` variables on a free loopback port and waits until it serves.
    pub fn start(count: usize) -> Self {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("asyncua_plc.py");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let mut child = Command::new("python3")
            .arg(&script)
            .arg(port.to_string())
            .arg(count.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python3 runs: install Python 3 and `pip install asyncua` (.ci/run does)");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let (said, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if said.send(line).is_err() {
                    return;
                }
            }
        });
        let (complained, complaints) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                text.push_str(&line);
                text.push('\n');
            }
            let _ = complained.send(text);
        });
        let line = lines.recv_timeout(START_WITHIN).unwrap_or_else(|_| {
            let said = complaints
                .recv_timeout(Duration::from_secs(5))
                .unwrap_or_default();
            panic!(
                "the asyncua server did not start within {START_WITHIN:?} (install it with \
                 `pip install asyncua`; .ci/run does): {said}"
            )
        });
        let namespace = line
            .strip_prefix(&format!("listening {port} "))
            .and_then(|rest| rest.trim().parse().ok())
            .unwrap_or_else(|| panic!("not a listening line: {line:?}"));
        Self {
            child,
            stdin,
            lines,
            port,
            namespace,
        }
    }

    /// Where it serves.
    pub fn url(&self) -> String {
        format!("opc.tcp://127.0.0.1:{}/plc", self.port)
    }

    /// The node id of variable `index` (`V00042`).
    pub fn node(&self, index: usize) -> String {
        format!("ns={};s=V{index:05}", self.namespace)
    }

    /// The node id of the folder holding every variable.
    pub fn folder(&self) -> String {
        format!("ns={};s=Plant", self.namespace)
    }

    /// Sets every variable at once (variable `i` to `base + i`) and waits until it is done.
    pub fn set_all(&mut self, base: u32) {
        writeln!(self.stdin, "set {base}")
            .and_then(|()| self.stdin.flush())
            .expect("the server takes the command");
        let done = format!("set {base}");
        loop {
            let line = self
                .lines
                .recv_timeout(START_WITHIN)
                .expect("the server sets its variables in time");
            if line == done {
                return;
            }
        }
    }
}

impl Drop for AsyncuaPlc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
