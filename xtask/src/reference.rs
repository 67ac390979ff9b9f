//! The reference server of `cargo xtask bench`: the least a server can do with the same frames.
//!
//! tokio, `LengthDelimitedCodec` and prost, one task per connection, no login check, no
//! multiplexing (each frame is answered before the next is read) and no handlers beyond
//! Hello and Ping. It is what TServer's ping numbers are compared with in the same run.

use std::net::SocketAddr;

use anyhow::Context;
use futures::{SinkExt, StreamExt};
use prost::Message;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use tserver_proto::v1::{
    ClientFrame, Error, ErrorCode, HelloReply, Pong, ServerFrame, client_frame, server_frame,
};
use tserver_proto::{DEFAULT_MAX_FRAME, PROTOCOL_VERSION};

/// Serves until killed; prints `listening on ADDR` once bound.
pub(crate) fn run(listen: SocketAddr) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let listener = TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        println!("listening on {}", listener.local_addr()?);
        loop {
            let (socket, _) = listener.accept().await?;
            tokio::spawn(async move {
                // A connection ends on its client's close or its first bad frame.
                let _ = connection(socket).await;
            });
        }
    })
}

async fn connection(socket: TcpStream) -> anyhow::Result<()> {
    socket.set_nodelay(true)?;
    let codec = LengthDelimitedCodec::builder()
        .max_frame_length(DEFAULT_MAX_FRAME)
        .new_codec();
    let mut framed = Framed::new(socket, codec);
    while let Some(bytes) = framed.next().await {
        let frame = ClientFrame::decode(bytes?)?;
        let body = match frame.body {
            Some(client_frame::Body::Hello(hello)) => server_frame::Body::Hello(HelloReply {
                server_version: "reference".to_owned(),
                protocol_version: PROTOCOL_VERSION,
                user_name: hello.user_name,
            }),
            Some(client_frame::Body::Ping(ping)) => server_frame::Body::Pong(Pong { nonce: ping.nonce }),
            _ => server_frame::Body::Error(Error {
                code: ErrorCode::UnknownCall.into(),
                message: "the reference server answers Hello and Ping only".to_owned(),
            }),
        };
        let reply = ServerFrame {
            call_id: frame.call_id,
            body: Some(body),
        };
        framed.send(bytes::Bytes::from(reply.encode_to_vec())).await?;
    }
    Ok(())
}
