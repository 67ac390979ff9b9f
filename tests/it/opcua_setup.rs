//! Setting an OPC UA source up against a real server (the harness's async-opcua server):
//! a secured source refuses a server whose certificate is not trusted and says how to trust
//! it, `tserver sources PATH trust` trusts it (checking a thumbprint when given) and the
//! running source connects; `tserver sources PATH browse` lists what the server offers and
//! `--plant` writes tags that import and read live values.

use std::time::{Duration, Instant};

use opcua::crypto::X509;
use plant_model::{Quality, TagValue};
use tokio_util::sync::CancellationToken;
use tserver::Runtime;

use crate::mqtt_sources::until_connected;
use crate::opcua_sources::{good_number, solution_on, start_server, until};
use crate::support::{Solution, admin, try_admin};
use tserver_tests::opcua::{self as served, OpcUaServer};

/// The thumbprint of the harness server's certificate, as OPC UA tools write it.
pub(crate) fn server_thumbprint(server: &OpcUaServer) -> String {
    let der = served::certificate(&server.pki_dir()).expect("the server made its certificate");
    X509::from_der(&der).expect("reads").thumbprint().as_hex_string()
}

/// Waits (bounded) until the first source's last error says `words`; returns it.
async fn until_error_says(runtime: &Runtime, words: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = runtime.source_statuses().remove(0);
        if let Some((_, message)) = &status.last_error
            && message.contains(words)
        {
            return message.clone();
        }
        assert!(
            Instant::now() < deadline,
            "the source never said {words:?}: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_untrusted_server_is_refused_until_trust_takes_its_certificate() {
    let server = start_server();
    let (user, password) = server.credentials();
    let (user, password) = (user.to_owned(), password.to_owned());
    let solution = solution_on(&server, |source| {
        source.security = "Basic256Sha256".to_owned();
        source.mode = "Sign".to_owned();
        source.username = user.clone();
        source.password = "/secret:PlcPassword".to_owned();
    });
    let path = solution.path.to_str().expect("utf-8");
    admin(&["secrets", path, "set", "PlcPassword"], &format!("{password}\n"));
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");

    let refused = until_error_says(&runtime, "is not trusted").await;
    assert!(
        refused.contains("tserver sources <solution> trust plc") && refused.contains("opcua-pki/trusted"),
        "{refused}"
    );
    let sample = runtime
        .objects()
        .tag("Line1.Temp")
        .expect("in the plant")
        .current();
    assert_eq!(sample.quality, Quality::BAD, "{sample:?}");

    let thumbprint = server_thumbprint(&server);
    let wrong = try_admin(&["sources", path, "trust", "plc", "--thumbprint", "00ff"], "")
        .expect_err("a thumbprint that is not the server's");
    assert!(
        wrong.to_string().contains(&thumbprint) && wrong.to_string().contains("nothing was trusted"),
        "{wrong}"
    );
    // Without a thumbprint and without a terminal to confirm on, nothing is trusted: the
    // certificate is shown, with the command that trusts it.
    let unconfirmed = try_admin(&["sources", path, "trust", "plc"], "")
        .expect_err("nobody confirmed it")
        .to_string();
    assert!(
        unconfirmed.starts_with(&format!(
            "nothing was trusted: the certificate of {}",
            server.url()
        )) && unconfirmed.contains(&format!("thumbprint  {thumbprint}"))
            && unconfirmed.contains(&format!("trust plc --thumbprint {thumbprint}")),
        "{unconfirmed}"
    );
    let trusted = admin(
        &["sources", path, "trust", "plc", "--thumbprint", &thumbprint],
        "",
    );
    assert!(
        trusted.starts_with(&format!("trusted: the certificate of {}", server.url()))
            && trusted.contains(&format!("thumbprint  {thumbprint}"))
            && trusted.contains("own/cert.der"),
        "{trusted}"
    );
    let again = admin(
        &[
            "sources",
            path,
            "trust",
            "plc",
            "--thumbprint",
            &thumbprint.to_lowercase(),
        ],
        "",
    );
    assert!(again.starts_with("already trusted"), "{again}");

    // The running source picks the trusted certificate up at its next try.
    until_connected(&runtime).await;
    until(&runtime, "Line1.Temp", good_number, "read over Sign").await;
    shutdown.cancel();
}

#[tokio::test]
async fn browse_lists_what_the_server_offers_and_says_what_is_wrong() {
    let mut server = start_server();
    let solution = solution_on(&server, |_| {});
    let path = solution.path.to_str().expect("utf-8");

    let objects = admin(&["sources", path, "browse", "plc"], "");
    let header = objects.lines().next().expect("a header");
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        [
            "NODE",
            "BROWSE",
            "NAME",
            "CLASS",
            "DATA",
            "TYPE",
            "ACCESS",
            "DESCRIPTION"
        ]
    );
    let folder = server.node(served::FOLDER);
    assert!(
        objects
            .lines()
            .any(|line| line.split_whitespace().collect::<Vec<_>>() == [folder.as_str(), "Line1", "Object"]),
        "{objects}"
    );

    let line1 = admin(&["sources", path, "browse", "plc", &folder], "");
    let row = |name: &str| -> Vec<String> {
        let node = server.node(name);
        line1
            .lines()
            .find(|line| line.starts_with(&format!("{node} ")))
            .unwrap_or_else(|| panic!("no row for {node}: {line1}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        row(served::TEMP),
        [&server.node(served::TEMP), "Temp", "Variable", "Double", "read"]
    );
    assert_eq!(
        row(served::SETPOINT),
        [
            &server.node(served::SETPOINT),
            "Setpoint",
            "Variable",
            "Double",
            "read-write"
        ]
    );
    assert_eq!(row(served::NAME)[3], "String");
    assert_eq!(row(served::RUNNING)[3], "Boolean");

    let unknown = server.node("Line1.Nothing");
    let error = try_admin(&["sources", path, "browse", "plc", &unknown], "").expect_err("unknown node");
    assert!(error.to_string().contains("BadNodeIdUnknown"), "{error}");
    let error = try_admin(&["sources", path, "browse", "plc", "Line1"], "").expect_err("not a node id");
    assert!(
        error.to_string().contains("node \"Line1\": not a node id"),
        "{error}"
    );
    let error = try_admin(&["sources", path, "browse", "plant"], "").expect_err("no such source");
    assert_eq!(
        error.to_string(),
        "the plant has no source named \"plant\" (its sources: plc)"
    );

    // A server that is away is said to be so at once, by both commands.
    server.kill();
    for command in ["browse", "trust"] {
        let error = try_admin(&["sources", path, command, "plc"], "").expect_err("away");
        assert!(
            error
                .to_string()
                .starts_with(&format!("cannot reach {}", server.url()))
                && error.to_string().contains("refused"),
            "{command}: {error}"
        );
    }
}

#[tokio::test]
async fn the_plant_skeleton_of_a_folder_imports_and_reads_live_values() {
    let server = start_server();
    // The demo plant and the source alone: the skeleton brings the tags.
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8");
    let mut model = plant_model::read(
        &admin(&["plant", path, "export"], ""),
        plant_model::Format::Toml,
        "demo",
    )
    .expect("reads");
    model.sources.push(plant_model::SourceSpec {
        sampling_interval: 100,
        publishing_interval: 100,
        ..plant_model::SourceSpec::new("plc", server.url())
    });
    let folder = server.node(served::FOLDER);
    let base = model.to_toml().expect("toml");
    let file = solution.path.with_file_name("plc.toml");
    std::fs::write(&file, &base).expect("writes");
    admin(&["plant", path, "import", file.to_str().expect("utf-8")], "");

    let skeleton = admin(&["sources", path, "browse", "plc", &folder, "--plant"], "");
    assert!(
        skeleton.starts_with(&format!(
            "# Tags for the 10 variables under {folder} of {}.\n",
            server.url()
        )),
        "{skeleton}"
    );
    let combined = format!("{base}\n{skeleton}");
    let tags = plant_model::read(&combined, plant_model::Format::Toml, "plc.toml")
        .expect("the plant file with the skeleton added reads")
        .tags;
    let tag = |name: &str| {
        tags.iter()
            .find(|tag| tag.name == name)
            .unwrap_or_else(|| panic!("no tag {name}: {skeleton}"))
    };
    assert_eq!(tag("Line1.Temp").path, "Line1/Temp");
    assert_eq!(tag("Line1.Temp").kind, plant_model::TagType::Number);
    assert_eq!(tag("Line1.Count").kind, plant_model::TagType::Integer);
    assert_eq!(tag("Line1.Running").kind, plant_model::TagType::Bool);
    assert_eq!(tag("Line1.Name").kind, plant_model::TagType::String);
    assert!(tag("Line1.Setpoint").writable && !tag("Line1.Temp").writable);
    let node = tag("Line1.Pressure")
        .source
        .as_ref()
        .and_then(|source| source.node.clone());
    assert_eq!(
        node,
        Some(format!(
            "ns={};i={}",
            server.namespace_index(),
            served::NUMERIC_ID
        ))
    );
    let opaque = tag("Line1.Level")
        .source
        .as_ref()
        .and_then(|source| source.node.clone());
    assert_eq!(opaque, Some(server.opaque_node()));

    std::fs::write(&file, combined).expect("writes");
    admin(&["plant", path, "import", file.to_str().expect("utf-8")], "");
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    until_connected(&runtime).await;
    until(
        &runtime,
        "Line1.Temp",
        good_number,
        "read through the skeleton's binding",
    )
    .await;
    until(
        &runtime,
        "Line1.Name",
        |value, quality| *value == TagValue::Text(served::NAME_VALUE.into()) && quality == Quality::GOOD,
        "read",
    )
    .await;
    shutdown.cancel();
}

/// A command running in a terminal of its own (tmux, on a socket of the test's own), read as a
/// person sees the screen.
struct Terminal {
    socket: String,
}

impl Terminal {
    /// Runs `command` (a shell line) in a new terminal; the screen stays after it ends.
    fn run(command: &str) -> Self {
        let socket = format!("tserver-test-{}-{}", std::process::id(), rand_suffix());
        let started = std::process::Command::new("tmux")
            .args([
                "-L",
                &socket,
                "new-session",
                "-d",
                "-x",
                "200",
                "-y",
                "50",
                "-s",
                "t",
            ])
            .arg(format!("{command}; echo \"EXIT=$?\"; sleep 120"))
            .status()
            .expect("tmux runs: install it with `apt-get install -y tmux` (.ci/run does)");
        assert!(started.success(), "tmux starts a session");
        Self { socket }
    }

    /// The screen now.
    fn screen(&self) -> String {
        let shown = std::process::Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p", "-t", "t", "-S", "-200"])
            .output()
            .expect("tmux shows the screen");
        String::from_utf8_lossy(&shown.stdout).into_owned()
    }

    /// Waits (bounded) until the screen shows `text`; returns the screen.
    async fn until_shows(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "the screen never showed {text:?}:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Types `line` and Enter.
    fn type_line(&self, line: &str) {
        let sent = std::process::Command::new("tmux")
            .args(["-L", &self.socket, "send-keys", "-t", "t", line, "Enter"])
            .status()
            .expect("tmux types");
        assert!(sent.success());
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

/// A few random hex digits, so two tests' terminals never share a socket.
fn rand_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    format!("{nanos:08x}")
}

/// On a terminal, `sources trust` without a thumbprint shows the certificate the server
/// presents and trusts it only when the person there answers yes.
#[tokio::test]
async fn on_a_terminal_the_certificate_is_shown_and_trusted_only_when_confirmed() {
    let server = start_server();
    let solution = solution_on(&server, |source| {
        source.security = "Basic256Sha256".to_owned();
        source.mode = "Sign".to_owned();
    });
    let path = solution.path.to_str().expect("utf-8");
    let thumbprint = server_thumbprint(&server);
    let command = format!(
        "{} sources {path} trust plc",
        env!("CARGO_BIN_EXE_tserver-under-test")
    );

    let declined = Terminal::run(&command);
    let asked = declined.until_shows("trust it? [y/N]").await;
    assert!(
        asked.contains(&format!("thumbprint  {thumbprint}")) && asked.contains("subject"),
        "{asked}"
    );
    declined.type_line("n");
    let screen = declined.until_shows("EXIT=").await;
    assert!(
        screen.contains("nothing was trusted") && screen.contains("EXIT=0"),
        "{screen}"
    );
    drop(declined);
    let trusted_dir = solution.path.with_file_name("plant.db.opcua-pki").join("trusted");
    let trusted_files = || {
        std::fs::read_dir(&trusted_dir)
            .map(|files| files.count())
            .unwrap_or(0)
    };
    assert_eq!(trusted_files(), 0, "nothing in {}", trusted_dir.display());

    let confirmed = Terminal::run(&command);
    confirmed.until_shows("trust it? [y/N]").await;
    confirmed.type_line("y");
    let screen = confirmed.until_shows("EXIT=").await;
    assert!(
        screen.contains(&format!("trusted: the certificate of {}", server.url()))
            && screen.contains("EXIT=0"),
        "{screen}"
    );
    assert_eq!(trusted_files(), 1, "{screen}");
}
