//! The chat path's keep-alive connections to plain-HTTP model servers: a pool that takes a
//! connection back in the same step that reads a response's last byte, and hands the body over
//! as it arrives (a streamed answer is read a chunk at a time).
//!
//! reqwest's pool (hyper-util) takes a connection back from a task of its own after a response
//! ends, and a POST that finds the pool empty meanwhile opens another connection. A turn's next
//! POST nearly always starts in that gap, so under load reqwest opened more connections than
//! POSTs were ever in flight (72 to 103 for 64 turns in flight). Here a connection is in the
//! idle list before the POST returns, and the next POST waits the microseconds the connection
//! needs to be ready again: the connections open to a server never outnumber the POSTs that
//! were in flight at once.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use bytes::buf::Chain;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;

/// How long a connection may sit idle before it is closed (reqwest's default too).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// A request body as it is sent: its parts, one after another (see `llm::RequestBody`).
pub(crate) type RequestBuf = Chain<Chain<Bytes, Bytes>, Bytes>;

type Sender = SendRequest<Full<RequestBuf>>;

/// Where connections go: the host and port of a plain-HTTP URL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Origin {
    /// The host as the URL writes it (an IPv6 address in brackets).
    host: String,
    port: u16,
}

impl Origin {
    /// The origin of an `http` URL; `None` for any other scheme or a URL without a host.
    pub(crate) fn of(url: &reqwest::Url) -> Option<Self> {
        if url.scheme() != "http" {
            return None;
        }
        Some(Self {
            host: url.host_str()?.to_owned(),
            port: url.port_or_known_default()?,
        })
    }

    /// The `Host` header's value: the port only when it is not 80.
    pub(crate) fn host_header(&self) -> String {
        if self.port == 80 {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The host's addresses: an IP literal as it is, a name through the system resolver.
    async fn addresses(&self) -> Result<Vec<SocketAddr>, ExchangeError> {
        let literal = self.host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = literal.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, self.port)]);
        }
        let addresses: Vec<SocketAddr> = tokio::net::lookup_host((self.host.as_str(), self.port))
            .await
            .map_err(|_| ExchangeError::Resolve)?
            .collect();
        if addresses.is_empty() {
            return Err(ExchangeError::Resolve);
        }
        Ok(addresses)
    }
}

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExchangeError {
    /// The host name did not resolve.
    #[error("cannot resolve the host name")]
    Resolve,
    /// No connection could be made to any of the host's addresses.
    #[error("cannot connect: {0}")]
    Connect(#[source] std::io::Error),
    /// The connection failed before the response's head arrived.
    #[error("HTTP/1 exchange failed: {0}")]
    Http(#[source] hyper::Error),
    /// The connection failed while the response's body was read.
    #[error("the response body could not be read: {0}")]
    Body(#[source] hyper::Error),
}

/// A response whose body is read as it arrives. Its connection goes back to the pool when the
/// body has been read to its end; dropped before that, the connection is closed.
#[derive(Debug)]
pub(crate) struct PooledResponse<'a> {
    pub(crate) status: StatusCode,
    /// The `Location` header, for the warning about a redirect (never followed).
    pub(crate) location: Option<String>,
    body: Incoming,
    /// The connection, until the body's end returns it to `pool`.
    connection: Option<Sender>,
    pool: &'a ModelConnections,
    origin: &'a Origin,
}

impl PooledResponse<'_> {
    /// The next bytes of the body, `None` at its end (when the connection goes back to the
    /// pool, in the same step).
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, ExchangeError> {
        while let Some(frame) = self.body.frame().await {
            let frame = frame.map_err(ExchangeError::Body)?;
            if let Ok(data) = frame.into_data()
                && !data.is_empty()
            {
                return Ok(Some(data));
            }
        }
        if let Some(sender) = self.connection.take() {
            self.pool.checkin(self.origin, sender);
        }
        Ok(None)
    }
}

/// An idle connection and since when.
#[derive(Debug)]
struct Idle {
    sender: Sender,
    since: Instant,
}

/// The pool: idle connections per origin, most recently used last.
#[derive(Debug, Default)]
pub(crate) struct ModelConnections {
    idle: Mutex<foldhash::HashMap<Origin, Vec<Idle>>>,
}

impl ModelConnections {
    /// Sends `request` on an idle connection to `origin` (or a new one) and returns the
    /// response once its head has arrived; its body is read with [`PooledResponse::chunk`].
    pub(crate) async fn send<'a>(
        &'a self,
        origin: &'a Origin,
        mut request: Request<Full<RequestBuf>>,
    ) -> Result<PooledResponse<'a>, ExchangeError> {
        let (sender, response) = loop {
            let (mut sender, reused) = match self.checkout(origin).await {
                Some(sender) => (sender, true),
                None => (connect(origin).await?, false),
            };
            match sender.try_send_request(request).await {
                Ok(response) => break (sender, response),
                Err(mut failed) => match failed.take_message() {
                    // An idle connection the server closed meanwhile hands the request back
                    // unsent: it goes on the next idle connection or a new one.
                    Some(unsent) if reused => request = unsent,
                    _ => return Err(ExchangeError::Http(failed.into_error())),
                },
            }
        };
        Ok(PooledResponse {
            status: response.status(),
            location: location(response.headers()),
            body: response.into_body(),
            connection: Some(sender),
            pool: self,
            origin,
        })
    }

    /// The most recently used idle connection to `origin` that is (or becomes) ready; closed
    /// ones are dropped on the way. Waiting for readiness is what makes reuse certain: a
    /// connection checked in a moment ago is ready as soon as its task has seen the response end.
    async fn checkout(&self, origin: &Origin) -> Option<Sender> {
        loop {
            let idle = {
                let mut pools = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
                pools.get_mut(origin)?.pop()?
            };
            let mut sender = idle.sender;
            if sender.ready().await.is_ok() {
                return Some(sender);
            }
        }
    }

    /// Puts a connection whose response was read whole back in the pool, and closes the
    /// connections of that origin idle past [`IDLE_TIMEOUT`].
    fn checkin(&self, origin: &Origin, sender: Sender) {
        let now = Instant::now();
        let mut pools = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let checked_in = Idle { sender, since: now };
        // Looked up before inserting: `entry` would take an owned key, a copy of the origin at
        // every response.
        match pools.get_mut(origin) {
            Some(idle) => {
                // Oldest first: the expired ones are a prefix.
                let expired = idle
                    .iter()
                    .take_while(|entry| now.duration_since(entry.since) > IDLE_TIMEOUT)
                    .count();
                idle.drain(..expired);
                idle.push(checked_in);
            }
            None => {
                pools.insert(origin.clone(), vec![checked_in]);
            }
        }
    }
}

/// Opens a connection to the first of the origin's addresses that answers, and starts the task
/// that drives it (it ends when the connection closes or its sender is dropped).
async fn connect(origin: &Origin) -> Result<Sender, ExchangeError> {
    let mut last_error = None;
    for address in origin.addresses().await? {
        match tokio::net::TcpStream::connect(address).await {
            Ok(stream) => {
                // Requests are written whole; waiting to coalesce them only adds latency.
                let _ = stream.set_nodelay(true);
                let (sender, connection) = http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(ExchangeError::Http)?;
                tokio::spawn(async move {
                    if let Err(error) = connection.await {
                        tracing::debug!(%error, "model-server connection ended with an error");
                    }
                });
                return Ok(sender);
            }
            Err(error) => last_error = Some(error),
        }
    }
    Err(ExchangeError::Connect(last_error.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, "the host has no address")
    })))
}

/// A response's `Location` header as text, if it has a readable one.
pub(crate) fn location(headers: &hyper::HeaderMap) -> Option<String> {
    headers
        .get(hyper::header::LOCATION)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use scripted_llm::{Reply, ScriptedLlm};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn origin_of(url: &str) -> Origin {
        Origin::of(&reqwest::Url::parse(url).expect("a URL")).expect("an http origin")
    }

    /// Sends a POST and reads its whole body.
    async fn exchange(pool: &ModelConnections, origin: &Origin) -> (StatusCode, Vec<u8>) {
        let mut response = pool.send(origin, post(origin)).await.expect("a response");
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.expect("a body") {
            body.extend_from_slice(&chunk);
        }
        (response.status, body)
    }

    fn post(origin: &Origin) -> Request<Full<RequestBuf>> {
        use bytes::Buf;
        let start = Bytes::from_static(b"{\"model\":\"m\",");
        let own = Bytes::from_static(b"\"messages\":[]");
        let tail = Bytes::from_static(b"}");
        Request::post("/v1/chat/completions")
            .header(hyper::header::HOST, origin.host_header())
            .body(Full::new(start.chain(own).chain(tail)))
            .expect("a request")
    }

    #[test]
    fn origins_are_plain_http_with_the_port_in_the_host_header_unless_80() {
        assert_eq!(origin_of("http://llm.local/v1").host_header(), "llm.local");
        assert_eq!(
            origin_of("http://llm.local:11434/v1").host_header(),
            "llm.local:11434"
        );
        assert_eq!(origin_of("http://[::1]:8080/").host_header(), "[::1]:8080");
        assert_eq!(
            Origin::of(&reqwest::Url::parse("https://api.example.com/v1").expect("a URL")),
            None
        );
    }

    #[tokio::test]
    async fn an_ipv6_literal_needs_no_resolver() {
        let addresses = origin_of("http://[::1]:8080/")
            .addresses()
            .await
            .expect("an address");
        assert_eq!(addresses, [SocketAddr::from(([0, 0, 0, 0, 0, 0, 0, 1], 8080))]);
    }

    #[tokio::test]
    async fn posts_one_after_another_share_one_connection() {
        let llm = ScriptedLlm::start(vec![Reply::text("a"), Reply::text("b"), Reply::text("c")])
            .await
            .expect("llm");
        let origin = origin_of(&llm.url());
        let pool = ModelConnections::default();
        for _ in 0..3 {
            let (status, body) = exchange(&pool, &origin).await;
            assert_eq!(status, StatusCode::OK);
            assert!(String::from_utf8_lossy(&body).contains("chat.completion"));
        }
        assert_eq!(llm.connections(), 1);
        llm.stop().await;
    }

    #[tokio::test]
    async fn a_connection_the_server_closes_is_not_reused() {
        let llm = ScriptedLlm::start(vec![
            Reply::Custom {
                status: 200,
                headers: vec![("connection".into(), "close".into())],
                body: scripted_llm::completion("closing").to_string().into_bytes(),
            },
            Reply::text("fresh"),
        ])
        .await
        .expect("llm");
        let origin = origin_of(&llm.url());
        let pool = ModelConnections::default();
        for text in ["closing", "fresh"] {
            let (_, body) = exchange(&pool, &origin).await;
            assert!(String::from_utf8_lossy(&body).contains(text));
        }
        assert_eq!(llm.connections(), 2);
        llm.stop().await;
    }

    #[tokio::test]
    async fn an_idle_connection_dropped_by_the_server_is_replaced() {
        // A server that answers one request per connection and then hangs up while idle, as
        // servers with a short keep-alive timeout do.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let url = format!("http://{}/", listener.local_addr().expect("an address"));
        let server = tokio::spawn(async move {
            let mut accepted = 0;
            while accepted < 2 {
                let (mut stream, _) = listener.accept().await.expect("accepts");
                accepted += 1;
                let mut request = Vec::new();
                let mut buffer = [0u8; 1024];
                // The whole request, body included (it ends the JSON of `post`), so that closing
                // leaves nothing unread, which would make the close a reset.
                while !request.ends_with(b"[]}") {
                    let read = stream.read(&mut buffer).await.expect("reads");
                    assert_ne!(read, 0, "the client hung up before its request");
                    request.extend_from_slice(&buffer[..read]);
                }
                let body = b"{\"ok\":true}";
                let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
                stream.write_all(head.as_bytes()).await.expect("writes");
                stream.write_all(body).await.expect("writes");
                drop(stream);
            }
            accepted
        });
        let origin = origin_of(&url);
        let pool = ModelConnections::default();
        let (_, first) = exchange(&pool, &origin).await;
        assert_eq!(first, b"{\"ok\":true}");
        // Let the pooled connection see the hang-up before the next POST.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (_, second) = exchange(&pool, &origin).await;
        assert_eq!(second, b"{\"ok\":true}");
        assert_eq!(server.await.expect("the server task"), 2);
    }

    #[tokio::test]
    async fn a_response_dropped_before_its_end_does_not_give_its_connection_back() {
        let llm = ScriptedLlm::start(vec![Reply::text("a long enough answer"), Reply::text("b")])
            .await
            .expect("llm");
        let origin = origin_of(&llm.url());
        let pool = ModelConnections::default();
        let response = pool.send(&origin, post(&origin)).await.expect("a response");
        assert_eq!(response.status, StatusCode::OK);
        drop(response);
        exchange(&pool, &origin).await;
        assert_eq!(llm.connections(), 2);
        llm.stop().await;
    }
}
