//! A PostgreSQL server of the test's own, for tests that must stop and restart it (the
//! machine's service is shared by every test running at once): made by `initdb` from Debian's
//! binaries in a temporary directory and served on a free loopback port, trust authentication
//! for `postgres`. Where PostgreSQL is not installed it fails saying how to install it.
//!
//! PostgreSQL refuses to run as root, so under root (CI) its processes run as the `postgres`
//! user the Debian package creates, and the directory is handed to that user.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's packages put each major version's binaries.
const VERSIONS: &str = "/usr/lib/postgresql";

/// A PostgreSQL server of this test.
#[derive(Debug)]
pub struct PrivatePostgres {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    bin: PathBuf,
    dir: tempfile::TempDir,
    /// The user its processes run as (uid, gid), when this process is root.
    run_as: Option<(u32, u32)>,
}

impl PrivatePostgres {
    /// Makes a new cluster and starts it on a free loopback port.
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// Like [`start`](Self::start), but every connection must give `password` for user
    /// `postgres` (SCRAM), as a production server would ask.
    pub fn start_with_password(password: &str) -> Self {
        Self::start_with(Some(password))
    }

    fn start_with(password: Option<&str>) -> Self {
        let bin = newest_bin().unwrap_or_else(|| {
            panic!("no PostgreSQL server binaries under {VERSIONS}: install them with `apt-get install -y postgresql`")
        });
        let dir = tempfile::tempdir().expect("temp dir");
        let run_as = rustix::process::geteuid().is_root().then(|| {
            let ids = postgres_user().expect(
                "running as root, PostgreSQL needs the `postgres` user (the postgresql package creates it)",
            );
            std::os::unix::fs::chown(dir.path(), Some(ids.0), Some(ids.1))
                .expect("hands the directory to postgres");
            ids
        });
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let mut server = Self {
            child: None,
            port,
            bin,
            dir,
            run_as,
        };
        let mut initdb = server.command("initdb");
        initdb
            .arg("-D")
            .arg(server.data())
            .args(["-U", "postgres", "-E", "UTF8", "--no-sync"]);
        match password {
            None => initdb.arg("--auth=trust"),
            Some(password) => {
                let file = server.dir.path().join("password");
                std::fs::write(&file, password).expect("writes the password file");
                if let Some((uid, gid)) = server.run_as {
                    std::os::unix::fs::chown(&file, Some(uid), Some(gid)).expect("hands it to postgres");
                }
                initdb
                    .arg("--auth=scram-sha-256")
                    .arg(format!("--pwfile={}", file.display()))
            }
        };
        let made = initdb
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("initdb runs");
        assert!(made.success(), "initdb made the cluster");
        server.resume();
        server
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A command of PostgreSQL's, run as the user PostgreSQL runs as.
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(self.bin.join(program));
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid);
        }
        command
    }

    /// Stops the server at once (its clients see their connections drop).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGQUIT: immediate shutdown. SIGKILL would leave the backends holding the shared
            // memory, and the next start would refuse.
            let pid = rustix::process::Pid::from_child(&child);
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::QUIT);
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and waits until it accepts connections.
    pub fn resume(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("postgres.log")).expect("creates the log");
        let child = self
            .command("postgres")
            .arg("-D")
            .arg(self.data())
            .args(["-p", &self.port.to_string(), "-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!("unix_socket_directories={}", self.dir.path().display()))
            .args(["-c", "fsync=off", "-c", "full_page_writes=off"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("postgres starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.accepts() {
            assert!(
                Instant::now() < deadline,
                "postgres did not accept connections on {}; its log:\n{}",
                self.port,
                std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether it accepts connections now (`pg_isready`).
    fn accepts(&self) -> bool {
        self.command("pg_isready")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
            .status()
            .is_ok_and(|status| status.success())
    }

    /// The URL of `database` on it, as user `postgres`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The binaries of the newest major version installed.
fn newest_bin() -> Option<PathBuf> {
    std::fs::read_dir(VERSIONS)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            Path::new(&bin)
                .join("postgres")
                .exists()
                .then_some((version, bin))
        })
        .max_by_key(|(version, _)| *version)
        .map(|(_, bin)| bin)
}

/// The `postgres` user's uid and gid, from /etc/passwd.
fn postgres_user() -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.first() == Some(&"postgres"))
            .then(|| Some((fields.get(2)?.parse().ok()?, fields.get(3)?.parse().ok()?)))?
    })
}
