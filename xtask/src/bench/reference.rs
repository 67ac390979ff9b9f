//! The reference server of `cargo xtask bench`: the least a server can do with the same frames.
//!
//! tokio, `LengthDelimitedCodec` and prost, one task per connection, no login check, no
//! multiplexing (each frame is answered before the next is read) and no handlers beyond
//! Hello and Ping. It is what TServer's ping numbers are compared with in the same run.
//!
//! As a relay (`--relay URL BODY_BYTES`) it is the least a server can do with a 1-tool chat
//! turn: each Ping is answered only after the two POSTs such a turn makes to the model server
//! at URL (the first asking, the second carrying a tool result), on one kept-alive hyper
//! connection per client connection, bodies of BODY_BYTES on average and nothing parsed. What a
//! turn costs beyond it is what TServer itself adds; what it costs is the price of the
//! process crossings a turn makes on this machine.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, bail};
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::Uri;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use prost::Message;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use tserver_proto::v1::{
    ClientFrame, Error, ErrorCode, HelloReply, Pong, ServerFrame, client_frame, server_frame,
};
use tserver_proto::{DEFAULT_MAX_FRAME, PROTOCOL_VERSION};

/// The model server a relay POSTs to and the two bodies of the turn it stands for.
#[derive(Debug)]
pub(crate) struct Relay {
    authority: String,
    uri: Uri,
    /// The turn's first POST (ends with the user's question) and its second (ends with a tool
    /// result), so that a model server answers them as it answers a real turn's.
    bodies: [Bytes; 2],
}

impl Relay {
    /// A relay to `url` whose two bodies average `body_bytes`.
    pub(crate) fn new(url: &str, body_bytes: usize) -> anyhow::Result<Self> {
        let uri: Uri = url.parse().with_context(|| format!("{url:?} is not a URL"))?;
        if uri.scheme_str() != Some("http") {
            bail!("{url:?}: the relay speaks plain http");
        }
        let authority = uri
            .authority()
            .with_context(|| format!("{url:?} names no host"))?
            .to_string();
        let question = r#"{"role":"user","content":"How is Pump1.MotorCurrent?"}"#;
        let answer = concat!(
            r#"{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","#,
            r#""function":{"name":"runtime_get_value","arguments":"{\"tag\":\"Pump1.MotorCurrent\"}"}}]},"#,
            r#"{"role":"tool","tool_call_id":"call_1","content":"{\"value\":12.5}"}"#
        );
        let body = |padding: &str, tail: &str| {
            format!(
                r#"{{"model":"reference","messages":[{{"role":"system","content":"{padding}"}},{question}{tail}]}}"#
            )
        };
        let bare = (body("", "").len() + body("", &format!(",{answer}")).len()) / 2;
        let padding = "x".repeat(body_bytes.saturating_sub(bare));
        Ok(Self {
            authority,
            uri,
            bodies: [
                Bytes::from(body(&padding, "")),
                Bytes::from(body(&padding, &format!(",{answer}"))),
            ],
        })
    }
}

/// Serves until killed; prints `listening on ADDR` once bound. With a relay, every Ping waits
/// for a 1-tool turn's POSTs.
pub(crate) fn run(listen: SocketAddr, relay: Option<Relay>) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let relay = relay.map(Arc::new);
    runtime.block_on(async {
        let listener = TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        println!("listening on {}", listener.local_addr()?);
        loop {
            let (socket, _) = listener.accept().await?;
            let relay = relay.clone();
            tokio::spawn(async move {
                // A connection ends on its client's close, its first bad frame or a failed POST.
                if let Err(error) = connection(socket, relay).await {
                    eprintln!("reference connection ended: {error:#}");
                }
            });
        }
    })
}

async fn connection(socket: TcpStream, relay: Option<Arc<Relay>>) -> anyhow::Result<()> {
    socket.set_nodelay(true)?;
    let codec = LengthDelimitedCodec::builder()
        .max_frame_length(DEFAULT_MAX_FRAME)
        .new_codec();
    let mut framed = Framed::new(socket, codec);
    let mut model = None;
    while let Some(bytes) = framed.next().await {
        let frame = ClientFrame::decode(bytes?)?;
        let body = match frame.body {
            Some(client_frame::Body::Hello(hello)) => server_frame::Body::Hello(HelloReply {
                server_version: "reference".to_owned(),
                protocol_version: PROTOCOL_VERSION,
                user_name: hello.user_name,
            }),
            Some(client_frame::Body::Ping(ping)) => {
                if let Some(relay) = &relay {
                    let sender = match &mut model {
                        Some(sender) => sender,
                        None => model.insert(connect(relay).await?),
                    };
                    for body in &relay.bodies {
                        post(sender, relay, body.clone()).await?;
                    }
                }
                server_frame::Body::Pong(Pong { nonce: ping.nonce })
            }
            _ => server_frame::Body::Error(Error {
                code: ErrorCode::UnknownCall.into(),
                message: "the reference server answers Hello and Ping only".to_owned(),
            }),
        };
        let reply = ServerFrame {
            call_id: frame.call_id,
            body: Some(body),
        };
        framed.send(Bytes::from(reply.encode_to_vec())).await?;
    }
    Ok(())
}

/// A kept-alive HTTP/1.1 connection to the relay's model server, driven by its own task.
async fn connect(relay: &Relay) -> anyhow::Result<http1::SendRequest<Full<Bytes>>> {
    let stream = TcpStream::connect(&relay.authority)
        .await
        .with_context(|| format!("cannot connect to {}", relay.authority))?;
    stream.set_nodelay(true)?;
    let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

/// One POST of `body`, its answer read to the end and not parsed.
async fn post(
    sender: &mut http1::SendRequest<Full<Bytes>>,
    relay: &Relay,
    body: Bytes,
) -> anyhow::Result<()> {
    let request = hyper::Request::post(relay.uri.clone())
        .header(hyper::header::HOST, relay.authority.as_str())
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(body))?;
    sender.ready().await?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    response.into_body().collect().await?;
    if !status.is_success() {
        bail!("the model server answered {status}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use scripted_llm::{Reply, ScriptedLlm};
    use serde_json::Value;

    use super::*;

    /// The last message's role of a recorded body.
    fn last_role(body: &[u8]) -> String {
        let body: Value = serde_json::from_slice(body).expect("a JSON body");
        body["messages"]
            .as_array()
            .and_then(|messages| messages.last())
            .and_then(|message| message["role"].as_str())
            .expect("a last message with a role")
            .to_owned()
    }

    #[tokio::test]
    async fn a_relayed_turn_posts_a_question_then_a_tool_result_of_the_asked_size() {
        let llm = ScriptedLlm::start([Reply::text("one"), Reply::text("two")])
            .await
            .expect("stand-in");
        let relay = Relay::new(&llm.url(), 11_600).expect("relay");
        let mut sender = connect(&relay).await.expect("connection");
        for body in &relay.bodies {
            post(&mut sender, &relay, body.clone()).await.expect("POST");
        }

        let requests = llm.requests();
        assert_eq!(requests.len(), 2, "one turn is two POSTs");
        assert_eq!(last_role(&requests[0].body), "user");
        assert_eq!(last_role(&requests[1].body), "tool");
        let stats = llm.stats();
        assert_eq!(
            stats.request_body_bytes,
            (requests[0].body.len() + requests[1].body.len()) as u64,
            "the stand-in counts the body bytes it answered"
        );
        assert_eq!(
            stats.request_body_bytes / 2,
            11_600,
            "the bodies average the size asked"
        );
        assert_eq!(stats.requests, 2);
    }

    #[tokio::test]
    async fn a_relay_whose_model_server_fails_says_so() {
        let llm = ScriptedLlm::start([Reply::Json {
            status: 503,
            body: serde_json::json!({"error": "busy"}),
        }])
        .await
        .expect("stand-in");
        let relay = Relay::new(&llm.url(), 100).expect("relay");
        let mut sender = connect(&relay).await.expect("connection");
        let error = post(&mut sender, &relay, relay.bodies[0].clone())
            .await
            .expect_err("a 503 fails the turn");
        assert!(error.to_string().contains("503"), "{error}");
    }

    #[test]
    fn a_relay_needs_a_plain_http_url() {
        let error = Relay::new("https://127.0.0.1:1/v1/chat/completions", 100).expect_err("https");
        assert!(error.to_string().contains("plain http"), "{error}");
        assert!(Relay::new("not a url", 100).is_err());
    }
}
