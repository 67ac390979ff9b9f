//! A real Mosquitto broker for the tests and the benchmark: started on a free loopback port with
//! a configuration of its own (so a test can stop and restart it on the same port), and a real
//! MQTT client to publish with. Where the broker is not installed it fails saying how to
//! install it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rumqttc::{AsyncClient, MqttOptions, QoS};

/// Where Debian's package puts the broker.
const MOSQUITTO: &str = "/usr/sbin/mosquitto";
const MOSQUITTO_PASSWD: &str = "/usr/bin/mosquitto_passwd";

/// A broker process of this test.
#[derive(Debug)]
pub struct Mosquitto {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    config: PathBuf,
    _dir: tempfile::TempDir,
}

/// How a test's broker is set up beyond a plain anonymous listener.
#[derive(Debug, Default)]
pub struct BrokerOptions {
    /// Only this user, with this password, may connect.
    pub user: Option<(String, String)>,
    /// TLS with this CA, server certificate and key (PEM texts).
    pub tls: Option<(String, String, String)>,
}

impl Mosquitto {
    /// Starts a broker on a free loopback port.
    pub fn start() -> Self {
        Self::start_with(BrokerOptions::default())
    }

    /// Starts a broker with `options` on a free loopback port.
    pub fn start_with(options: BrokerOptions) -> Self {
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
        // `set_tcp_nodelay`, as docs/PLANT.md tells users to set it: with Mosquitto's default
        // (Nagle's algorithm on), a subscriber at QoS 0 gets each message only once the previous
        // one is acknowledged, and it acknowledges late (delayed ACKs), up to tens of ms.
        let mut text =
            format!("listener {port} 127.0.0.1\npersistence false\nlog_dest none\nset_tcp_nodelay true\n");
        match &options.user {
            None => text.push_str("allow_anonymous true\n"),
            Some((user, password)) => {
                let file = dir.path().join("passwords");
                let made = Command::new(MOSQUITTO_PASSWD)
                    .args(["-c", "-b"])
                    .arg(&file)
                    .args([user, password])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .expect("mosquitto_passwd runs (it comes with the mosquitto package)");
                assert!(made.success(), "mosquitto_passwd made the password file");
                text.push_str(&format!(
                    "allow_anonymous false\npassword_file {}\n",
                    file.display()
                ));
            }
        }
        if let Some((ca, certificate, key)) = &options.tls {
            for (name, pem) in [("ca.pem", ca), ("cert.pem", certificate), ("key.pem", key)] {
                std::fs::write(dir.path().join(name), pem).expect("writes PEM");
            }
            text.push_str(&format!(
                "cafile {0}/ca.pem\ncertfile {0}/cert.pem\nkeyfile {0}/key.pem\n",
                dir.path().display()
            ));
        }
        std::fs::write(&config, text).expect("writes the config");
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
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the broker (SIGSTOP): its connections stay up, but it reads, sends and
    /// acknowledges nothing until [`Mosquitto::thaw`].
    pub fn freeze(&self) {
        self.signal(rustix::process::Signal::STOP);
    }

    /// Lets a frozen broker run again (SIGCONT).
    pub fn thaw(&self) {
        self.signal(rustix::process::Signal::CONT);
    }

    fn signal(&self, signal: rustix::process::Signal) {
        let child = self.child.as_ref().expect("the broker is running");
        let pid = rustix::process::Pid::from_child(child);
        rustix::process::kill_process(pid, signal).expect("the broker takes the signal");
    }

    /// Starts it again on the same port.
    pub fn resume(&mut self) {
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

    /// The broker's process id while it runs (benches read its scheduling).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The broker's URL, as a plant file writes it.
    pub fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A field-side client: a real MQTT client whose event loop runs in a task of its own,
/// handing the messages of its subscriptions to the test.
#[derive(Debug)]
pub struct Publisher {
    client: AsyncClient,
    received: tokio::sync::mpsc::UnboundedReceiver<(String, Vec<u8>)>,
    events: tokio::task::JoinHandle<()>,
}

impl Publisher {
    /// Connects to the broker on `port`.
    pub async fn connect(port: u16) -> Self {
        Self::connect_with_will(port, None).await
    }

    /// Connects leaving `will` (topic, payload) for the broker to publish if the connection
    /// drops without a goodbye.
    pub async fn connect_with_will(port: u16, will: Option<(String, Vec<u8>)>) -> Self {
        let mut options = MqttOptions::new(
            format!("test-publisher-{}", uuid::Uuid::new_v4().simple()),
            "127.0.0.1",
            port,
        );
        options.set_keep_alive(Duration::from_secs(5));
        options.set_max_packet_size(4 * 1024 * 1024, 4 * 1024 * 1024);
        if let Some((topic, payload)) = will {
            options.set_last_will(rumqttc::LastWill::new(topic, payload, QoS::AtLeastOnce, false));
        }
        let (client, mut events) = AsyncClient::new(options, 1024);
        let (deliver, received) = tokio::sync::mpsc::unbounded_channel();
        let (connected, is_connected) = tokio::sync::oneshot::channel();
        let events = tokio::spawn(async move {
            let mut connected = Some(connected);
            loop {
                match events.poll().await {
                    Ok(rumqttc::Event::Incoming(rumqttc::Packet::ConnAck(_))) => {
                        if let Some(connected) = connected.take() {
                            let _ = connected.send(());
                        }
                    }
                    Ok(rumqttc::Event::Incoming(rumqttc::Packet::Publish(message))) => {
                        let _ = deliver.send((message.topic.clone(), message.payload.to_vec()));
                    }
                    Ok(_) => {}
                    Err(_) => return,
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(10), is_connected)
            .await
            .expect("the test client connects within 10 s")
            .expect("the test client connects");
        Self {
            client,
            received,
            events,
        }
    }

    /// Publishes at least once, retained when asked.
    pub async fn publish(&self, topic: &str, payload: impl Into<Vec<u8>>, retain: bool) {
        self.client
            .publish(topic, QoS::AtLeastOnce, retain, payload.into())
            .await
            .expect("queued for the broker");
    }

    /// Subscribes to `filter` and waits until the broker has it.
    pub async fn subscribe(&mut self, filter: &str) {
        self.client
            .subscribe(filter, QoS::AtLeastOnce)
            .await
            .expect("queued for the broker");
        // A round trip through the broker: our own message on a private topic comes back
        // only after the subscription before it is in place.
        self.received_so_far().await;
    }

    /// The messages the broker has delivered to the subscriptions so far: those that come
    /// before a marker of our own, published now on a private topic, comes back.
    pub async fn received_so_far(&mut self) -> Vec<(String, Vec<u8>)> {
        let marker = format!("test-marker/{}", uuid::Uuid::new_v4().simple());
        self.client
            .subscribe(&marker, QoS::AtLeastOnce)
            .await
            .expect("queued");
        self.publish(&marker, "", false).await;
        let mut received = Vec::new();
        loop {
            let (topic, payload) = self.next().await;
            if topic == marker {
                return received;
            }
            received.push((topic, payload));
        }
    }

    /// The next message of the subscriptions, within 15 s.
    pub async fn next(&mut self) -> (String, Vec<u8>) {
        tokio::time::timeout(Duration::from_secs(15), self.received.recv())
            .await
            .expect("a message within 15 s")
            .expect("the client is running")
    }

    /// Drops the connection without a goodbye, so the broker publishes the will.
    pub fn vanish(self) {
        self.events.abort();
    }
}
