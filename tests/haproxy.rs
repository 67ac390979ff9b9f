//! A real HAProxy for the tests and the benchmark: `deploy/haproxy.cfg` itself, started on free
//! loopback ports in front of the nodes given, and its statistics page to see which nodes it
//! counts as up. Where HAProxy is not installed it fails saying how to install it. It sends each
//! node a PROXY protocol header from 127.0.0.1, so nodes run with `--trusted-proxy 127.0.0.1`.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's package puts it.
const HAPROXY: &str = "/usr/sbin/haproxy";

/// The shipped configuration, which the tests run as users would.
const CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/haproxy.cfg");

/// One tserver node behind HAProxy: its framed-protocol address and its `--http` address
/// (the health check's).
#[derive(Debug, Clone, Copy)]
pub struct Node {
    /// `tserver serve --listen`.
    pub listen: SocketAddr,
    /// `tserver serve --http`.
    pub http: SocketAddr,
}

/// An HAProxy process of this test.
#[derive(Debug)]
pub struct Haproxy {
    child: Child,
    /// Where clients of the framed protocol connect.
    pub front: SocketAddr,
    /// Where HTTP clients (browsers, MCP clients) connect.
    pub http_front: SocketAddr,
    /// Its statistics page.
    pub stats: SocketAddr,
    /// Its log (the shipped configuration logs to stderr): node state changes.
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// A free port on 127.0.0.1 (free when asked; the caller binds it at once).
pub fn free_loopback_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
}

impl Haproxy {
    /// Starts HAProxy with `deploy/haproxy.cfg` in front of the two `nodes`, on free loopback
    /// ports, and waits until it accepts connections.
    pub fn start(nodes: [Node; 2]) -> Self {
        assert!(
            std::path::Path::new(HAPROXY).exists(),
            "{HAPROXY} is missing: install it with `apt-get install -y haproxy` (.ci/run does)"
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("haproxy.log");
        let front = free_loopback_addr();
        let http_front = free_loopback_addr();
        let stats = free_loopback_addr();
        let child = Command::new(HAPROXY)
            // -db: stay in the foreground, so the test owns the process.
            .args(["-db", "-f", CONFIG])
            .env("TSERVER_FRONT", front.to_string())
            .env("TSERVER_HTTP_FRONT", http_front.to_string())
            .env("TSERVER_HAPROXY_STATS", stats.to_string())
            .env("TSERVER_NODE1_HTTP", nodes[0].http.to_string())
            .env("TSERVER_NODE2_HTTP", nodes[1].http.to_string())
            .env("TSERVER_NODE1", nodes[0].listen.to_string())
            .env("TSERVER_NODE1_HTTP_PORT", nodes[0].http.port().to_string())
            .env("TSERVER_NODE2", nodes[1].listen.to_string())
            .env("TSERVER_NODE2_HTTP_PORT", nodes[1].http.port().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("creates the log"))
            .spawn()
            .expect("haproxy starts");
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut haproxy = Self {
            child,
            front,
            http_front,
            stats,
            log,
            _dir: dir,
        };
        // Every listener of it, the statistics page's too: a test may read that first.
        for address in [front, http_front, stats] {
            while std::net::TcpStream::connect(address).is_err() {
                let exited = haproxy.child.try_wait().ok().flatten();
                assert!(
                    Instant::now() < deadline && exited.is_none(),
                    "haproxy did not listen on {address} ({exited:?}); its log:\n{}",
                    haproxy.log()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        haproxy
    }

    /// What it has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Each node's state as HAProxy's statistics say (`UP`, `DOWN`, `UP 1/2`...), in the
    /// configuration's order.
    pub async fn node_states(&self) -> Vec<String> {
        self.node_column("tserver_nodes", "status").await
    }

    /// How many connections (sessions, in HAProxy's words) each node's HTTP surface was sent
    /// through the HTTP front, in the configuration's order.
    pub async fn http_connections(&self) -> Vec<u64> {
        self.node_column("tserver_http_nodes", "stot")
            .await
            .iter()
            .map(|count| count.parse().expect("a count"))
            .collect()
    }

    /// The statistics' `column` for each node of `backend`.
    async fn node_column(&self, backend: &str, column: &str) -> Vec<String> {
        let csv = reqwest::get(format!("http://{}/;csv", self.stats))
            .await
            .expect("the statistics page answers")
            .text()
            .await
            .expect("a CSV body");
        let mut lines = csv.lines();
        let header: Vec<&str> = lines
            .next()
            .expect("a header line")
            .trim_start_matches("# ")
            .split(',')
            .collect();
        let position = |name: &str| {
            header
                .iter()
                .position(|field| *field == name)
                .unwrap_or_else(|| panic!("the statistics have a {name} column"))
        };
        let (proxy, server, wanted) = (position("pxname"), position("svname"), position(column));
        lines
            .map(|line| line.split(',').collect::<Vec<&str>>())
            .filter(|fields| fields[proxy] == backend && fields[server].starts_with("node"))
            .map(|fields| fields[wanted].to_owned())
            .collect()
    }

    /// Waits (at most 10 s) until HAProxy counts every node as up, on both fronts.
    pub async fn wait_until_all_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut states = self.node_states().await;
            states.extend(self.node_column("tserver_http_nodes", "status").await);
            if states.iter().all(|state| state == "UP") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "haproxy's nodes are not all up: {states:?}; its log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
