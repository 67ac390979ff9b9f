//! A real Mosquitto broker for the tests: started on a free loopback port with a configuration
//! of its own (so a test can stop and restart it on the same port), and a real MQTT client to
//! publish with. Where the broker is not installed the tests fail saying how to install it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rumqttc::{AsyncClient, MqttOptions, QoS};

/// Where Debian's package puts the broker.
const MOSQUITTO: &str = "/usr/sbin/mosquitto";

/// A broker process of this test.
pub(crate) struct Mosquitto {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub(crate) port: u16,
    config: PathBuf,
    _dir: tempfile::TempDir,
}

impl Mosquitto {
    /// Starts a broker on a free loopback port.
    pub(crate) fn start() -> Self {
        assert!(
            std::path::Path::new(MOSQUITTO).exists(),
            "{MOSQUITTO} is missing: install the broker with `apt-get install -y mosquitto` (.ci/run does)"
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("mosquitto.conf");
        std::fs::write(
            &config,
            format!("listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\nlog_dest none\n"),
        )
        .expect("writes the config");
        let mut broker = Self {
            child: None,
            port,
            config,
            _dir: dir,
        };
        broker.resume();
        broker
    }

    /// Stops the broker (its clients see the connection drop).
    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port.
    pub(crate) fn resume(&mut self) {
        let child = Command::new(MOSQUITTO)
            .arg("-c")
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mosquitto starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "mosquitto did not listen on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The broker's URL, as a plant file writes it.
    pub(crate) fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A publisher: a real MQTT client whose event loop runs in a task of its own.
pub(crate) struct Publisher {
    client: AsyncClient,
    _events: tokio::task::JoinHandle<()>,
}

impl Publisher {
    pub(crate) async fn connect(port: u16) -> Self {
        let mut options = MqttOptions::new(
            format!("test-publisher-{}", uuid::Uuid::new_v4().simple()),
            "127.0.0.1",
            port,
        );
        options.set_keep_alive(Duration::from_secs(5));
        let (client, mut events) = AsyncClient::new(options, 1024);
        let events = tokio::spawn(async move { while events.poll().await.is_ok() {} });
        Self {
            client,
            _events: events,
        }
    }

    /// Publishes at least once, retained when asked.
    pub(crate) async fn publish(&self, topic: &str, payload: impl Into<Vec<u8>>, retain: bool) {
        self.client
            .publish(topic, QoS::AtLeastOnce, retain, payload.into())
            .await
            .expect("queued for the broker");
    }
}
