//! Browser-like clients of tserver's `/ws` for `cargo xtask bench`, speaking the wire messages
//! as canonical JSON text messages (tserver-proto's JSON functions), logged in by Hello as the
//! bench's passwordless guest, and the call load they put on it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tserver_proto::v1::{ClientFrame, Hello, Ping, ServerFrame, client_frame, server_frame};
use tserver_proto::{Decoded, PROTOCOL_VERSION, decode_json, encode_json};

/// How long one call or one login may take before it counts as failed.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

/// One logged-in WebSocket.
pub(crate) struct Socket {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_call: u64,
}

impl Socket {
    /// Opens `/ws` on the HTTP surface at `http_addr` as a page of that server would (its own
    /// origin) and says Hello as the guest.
    pub(crate) async fn open(http_addr: &str) -> anyhow::Result<Self> {
        let mut request = format!("ws://{http_addr}/ws").into_client_request()?;
        request
            .headers_mut()
            .insert("Origin", format!("http://{http_addr}").parse()?);
        let (socket, _) = tokio::time::timeout(PATIENCE, tokio_tungstenite::connect_async(request))
            .await
            .context("the upgrade took too long")?
            .context("the upgrade failed")?;
        let mut socket = Self { socket, next_call: 1 };
        let hello = client_frame::Body::Hello(Hello {
            protocol_version: PROTOCOL_VERSION,
            client_name: "xtask websocket-bench".to_owned(),
            user_name: "guest".to_owned(),
            password: String::new(),
        });
        match socket.call(hello).await? {
            Some(server_frame::Body::Hello(_)) => Ok(socket),
            other => bail!("Hello was answered with {other:?}"),
        }
    }

    /// Sends `body` as a call of its own and reads to its answer (frames of other calls, such
    /// as subscription updates, are passed over).
    pub(crate) async fn call(
        &mut self,
        body: client_frame::Body,
    ) -> anyhow::Result<Option<server_frame::Body>> {
        let call_id = self.next_call;
        self.next_call += 1;
        self.send(ClientFrame {
            call_id,
            body: Some(body),
        })
        .await?;
        loop {
            let frame = self.receive().await?.context("the server closed the WebSocket")?;
            if frame.call_id == call_id && !matches!(frame.body, Some(server_frame::Body::ChatProgress(_))) {
                return Ok(frame.body);
            }
        }
    }

    pub(crate) async fn send(&mut self, frame: ClientFrame) -> anyhow::Result<()> {
        self.socket
            .send(Message::text(encode_json(&frame)))
            .await
            .context("cannot send")
    }

    /// The next frame within the patience; `None` once the server closed the socket.
    pub(crate) async fn receive(&mut self) -> anyhow::Result<Option<ServerFrame>> {
        self.receive_within(PATIENCE)
            .await?
            .context("no frame within the patience")
    }

    /// The next frame within `wait` (`None` outside: nothing came), `Some(None)` once closed.
    pub(crate) async fn receive_within(
        &mut self,
        wait: Duration,
    ) -> anyhow::Result<Option<Option<ServerFrame>>> {
        loop {
            let Ok(next) = tokio::time::timeout(wait, self.socket.next()).await else {
                return Ok(None);
            };
            match next {
                Some(Ok(Message::Text(text))) => {
                    return match decode_json::<ServerFrame>(&text) {
                        Decoded::Message(frame) => Ok(Some(Some(frame))),
                        Decoded::Malformed(error) => bail!("a frame that is not a ServerFrame: {error}"),
                    };
                }
                Some(Ok(Message::Close(_))) | None => return Ok(Some(None)),
                Some(Err(error)) => return Err(error).context("the WebSocket failed"),
                Some(Ok(_)) => {}
            }
        }
    }
}

/// What each call of a load is.
#[derive(Debug, Clone)]
pub(crate) enum LoadCall {
    Ping,
    /// A chat turn asking this.
    Chat(String),
}

impl LoadCall {
    fn body(&self) -> client_frame::Body {
        match self {
            Self::Ping => client_frame::Body::Ping(Ping { nonce: 7 }),
            Self::Chat(query) => client_frame::Body::Chat(tserver_proto::v1::ChatRequest {
                query_json: query.clone(),
                stream: false,
            }),
        }
    }
}

/// Calls on `connections` WebSockets, one in flight each (as `tclient bench`), measured after
/// `warmup` until `count` calls were measured or `duration` passed, whichever comes first.
#[derive(Debug, Clone)]
pub(crate) struct Load {
    pub(crate) scenario: LoadCall,
    pub(crate) connections: usize,
    pub(crate) count: u64,
    pub(crate) duration: Duration,
    pub(crate) warmup: Duration,
}

/// What one connection of a load measured.
#[derive(Debug, Default)]
struct Measured {
    latencies_us: Vec<u64>,
    errors: BTreeMap<String, u64>,
}

impl Load {
    /// Runs the load and reports as `tclient bench --json` does (calls, callsPerSecond,
    /// latencyUs, errors), so the same readers judge both.
    pub(crate) async fn run(&self, http_addr: &str) -> anyhow::Result<Value> {
        let sockets =
            futures::future::try_join_all((0..self.connections).map(|_| Socket::open(http_addr))).await?;
        let start = Instant::now();
        let measure_from = start + self.warmup;
        let until = measure_from + self.duration;
        let remaining = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(
            i64::try_from(self.count).unwrap_or(i64::MAX),
        ));
        let measured = futures::future::join_all(sockets.into_iter().map(|socket| {
            let remaining = std::sync::Arc::clone(&remaining);
            tokio::spawn(self.clone().connection(socket, measure_from, until, remaining))
        }))
        .await;
        let seconds = measure_from
            .elapsed()
            .as_secs_f64()
            .min(self.duration.as_secs_f64());
        let mut all = Measured::default();
        for connection in measured {
            let connection = connection.context("a load task failed")?;
            all.latencies_us.extend(connection.latencies_us);
            for (kind, count) in connection.errors {
                *all.errors.entry(kind).or_default() += count;
            }
        }
        all.latencies_us.sort_unstable();
        let quantile = |q: f64| -> Value {
            if all.latencies_us.is_empty() {
                return Value::Null;
            }
            let index = ((all.latencies_us.len() - 1) as f64 * q).round() as usize;
            json!(all.latencies_us[index])
        };
        let calls = all.latencies_us.len();
        Ok(json!({
            "connections": self.connections,
            "inFlightPerConnection": 1,
            "calls": calls,
            "seconds": seconds,
            "callsPerSecond": calls as f64 / seconds.max(f64::EPSILON),
            "latencyUs": {"p50": quantile(0.5), "p99": quantile(0.99)},
            "errors": all.errors,
        }))
    }

    /// One connection's calls until the load ends.
    async fn connection(
        self,
        mut socket: Socket,
        measure_from: Instant,
        until: Instant,
        remaining: std::sync::Arc<std::sync::atomic::AtomicI64>,
    ) -> Measured {
        use std::sync::atomic::Ordering;
        let mut measured = Measured::default();
        loop {
            let started = Instant::now();
            if started >= until || remaining.load(Ordering::Relaxed) <= 0 {
                return measured;
            }
            let counted = started >= measure_from;
            if counted && remaining.fetch_sub(1, Ordering::Relaxed) <= 0 {
                return measured;
            }
            match socket.call(self.scenario.body()).await {
                Ok(Some(server_frame::Body::Error(error))) => {
                    *measured
                        .errors
                        .entry(error.code().as_str_name().to_owned())
                        .or_default() += 1;
                }
                Ok(Some(_)) => {
                    if counted {
                        measured
                            .latencies_us
                            .push(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
                    }
                }
                Ok(None) | Err(_) => {
                    *measured.errors.entry("connection".to_owned()).or_default() += 1;
                    return measured;
                }
            }
        }
    }
}
