//! `Connection`: the only place that sees bytes (with `websocket_link.rs`, its WebSocket
//! half). Frames in, frames out, over the framed TCP protocol or a WebSocket; the session
//! above runs the same whichever carries them.

use std::time::Duration;

use bytes::BytesMut;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio_util::codec::Decoder;
use tokio_util::codec::{Framed, FramedParts};
use tserver_proto::v1::{ClientFrame, ServerFrame};
use tserver_proto::{Decoded, FrameCodec, FrameError, Transport};

use super::websocket_link::{BrowserSocket, WebSocketLink};

/// Why a write did not complete.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("client did not read its replies for {0:?}")]
    Stalled(Duration),
}

/// Initial size of a connection's read and write buffers.
const INITIAL_BUFFER: usize = 256;

/// What carries the frames. An enum, not a trait object: the TCP path pays one match per call,
/// no allocation and no dynamic dispatch.
#[derive(Debug)]
enum Link {
    /// Length-prefixed protobuf over TCP (or TLS).
    Framed(Framed<Transport, FrameCodec<ClientFrame, ServerFrame>>),
    /// One message per frame over a WebSocket (boxed: most connections are TCP).
    WebSocket(Box<WebSocketLink>),
}

/// A client connection carrying frames.
#[derive(Debug)]
pub(crate) struct Connection {
    link: Link,
    /// How long one flush may wait for a client that does not read.
    write_timeout: Duration,
    /// The client has shut its sending side: nothing more can be read.
    input_closed: bool,
}

impl Connection {
    pub(crate) fn new(socket: Transport, max_frame: usize, write_timeout: Duration) -> Self {
        // Replies are small and latency matters more than packet count.
        let _ = socket.tcp().set_nodelay(true);
        // Most connections sit idle between small calls, so buffers start small and grow only
        // for frames that need it (tokio-util's default is 8 KiB each way per connection).
        let mut parts = FramedParts::new::<ServerFrame>(socket, FrameCodec::new(max_frame));
        parts.read_buf = BytesMut::with_capacity(INITIAL_BUFFER);
        parts.write_buf = BytesMut::with_capacity(INITIAL_BUFFER);
        Self {
            link: Link::Framed(Framed::from_parts(parts)),
            write_timeout,
            input_closed: false,
        }
    }

    /// A connection over a browser's (or a program's) WebSocket, reading messages of at most
    /// `max_frame` bytes (the upgrade bounded the socket's own buffers too).
    pub(crate) fn websocket(socket: BrowserSocket, max_frame: usize, write_timeout: Duration) -> Self {
        Self {
            link: Link::WebSocket(Box::new(WebSocketLink::new(socket, max_frame))),
            write_timeout,
            input_closed: false,
        }
    }

    /// Changes the largest frame read from the client from now on; replies keep the limit
    /// given at construction.
    pub(crate) fn set_max_frame(&mut self, max_frame: usize) {
        match &mut self.link {
            Link::Framed(framed) => framed.codec_mut().set_max_frame(max_frame),
            Link::WebSocket(link) => link.set_max_read(max_frame),
        }
    }

    /// The next frame; `None` once, when the client shuts its sending side. Cancel-safe:
    /// bytes already read stay buffered for the next call.
    ///
    /// After that `None` nothing more can be read, but a TCP client may only have half-closed
    /// (`shutdown(SHUT_WR)`) and still read its replies. What can still arrive is a reset,
    /// when the client is gone and a reply written to it bounced: the next call waits for
    /// that and returns it as an error, so the calls in flight stop at once. A WebSocket
    /// closed by its client is gone: the next call is that error at once.
    pub(crate) async fn read_frame(&mut self) -> Option<Result<Decoded<ClientFrame>, FrameError>> {
        let next = match &mut self.link {
            Link::Framed(framed) => {
                if self.input_closed {
                    let gone = framed.get_ref().tcp().ready(Interest::ERROR).await;
                    let error = match gone {
                        Err(error) => error,
                        Ok(_) => std::io::Error::from(std::io::ErrorKind::ConnectionReset),
                    };
                    return Some(Err(FrameError::Io(error)));
                }
                framed.next().await
            }
            Link::WebSocket(link) => {
                if self.input_closed {
                    let closed = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
                    return Some(Err(FrameError::Io(closed)));
                }
                link.read().await
            }
        };
        self.input_closed = next.is_none();
        next
    }

    /// Buffers a frame for writing; a frame too large to write is refused
    /// (`FrameError::TooLarge`) before any of it is buffered.
    pub(crate) async fn queue(&mut self, frame: ServerFrame) -> Result<(), WriteError> {
        let limit = self.write_timeout;
        let queued = match &mut self.link {
            Link::Framed(framed) => tokio::time::timeout(limit, framed.feed(frame)).await,
            Link::WebSocket(link) => tokio::time::timeout(limit, link.queue(frame)).await,
        };
        queued.map_err(|_| WriteError::Stalled(limit))??;
        Ok(())
    }

    /// Sends everything buffered, unless another whole frame is already waiting to be read:
    /// then its reply can go out in the same write.
    pub(crate) async fn flush_unless_more_input(&mut self) -> Result<(), WriteError> {
        if self.has_buffered_frame() {
            return Ok(());
        }
        self.flush().await
    }

    /// Sends everything buffered.
    pub(crate) async fn flush(&mut self) -> Result<(), WriteError> {
        let limit = self.write_timeout;
        let flushed = match &mut self.link {
            Link::Framed(framed) => tokio::time::timeout(limit, framed.flush()).await,
            Link::WebSocket(link) => tokio::time::timeout(limit, link.flush()).await,
        };
        flushed.map_err(|_| WriteError::Stalled(limit))??;
        Ok(())
    }

    /// Queues and flushes one frame, waiting at most `limit`: for last words before a close.
    pub(crate) async fn send_final(&mut self, frame: ServerFrame, limit: Duration) {
        let send = async {
            match &mut self.link {
                Link::Framed(framed) => {
                    let _ = framed.send(frame).await;
                }
                Link::WebSocket(link) => {
                    if link.queue(frame).await.is_ok() {
                        let _ = link.flush().await;
                    }
                }
            }
        };
        let _ = tokio::time::timeout(limit, send).await;
    }

    /// A whole frame already arrived but not yet taken, if any; never waits.
    pub(crate) fn take_buffered_frame(&mut self) -> Option<Decoded<ClientFrame>> {
        match &mut self.link {
            Link::Framed(framed) => {
                let max_frame = framed.codec().max_frame();
                FrameCodec::<ClientFrame, ServerFrame>::new(max_frame)
                    .decode(framed.read_buffer_mut())
                    .ok()
                    .flatten()
            }
            Link::WebSocket(link) => link.take_message(),
        }
    }

    /// Closes our side, then reads and drops whatever the client still sends, for at most
    /// `linger`. Closing a socket with unread input makes the kernel reset the connection, and
    /// a reset can destroy the last frames before the client reads them (the "lingering close"
    /// of web servers). A WebSocket is sent a close and waited for its answer.
    pub(crate) async fn close_gracefully(&mut self, linger: Duration) {
        match &mut self.link {
            Link::Framed(framed) => {
                let stream = framed.get_mut();
                let drain = async {
                    stream.shutdown().await?;
                    let mut scratch = [0u8; 1024];
                    while stream.read(&mut scratch).await? != 0 {}
                    Ok::<(), std::io::Error>(())
                };
                let _ = tokio::time::timeout(linger, drain).await;
            }
            Link::WebSocket(link) => {
                let _ = tokio::time::timeout(linger, link.close()).await;
            }
        }
    }

    /// Whether a whole frame has already arrived: read, for TCP; for a WebSocket, a message
    /// the socket holds (looked at without waiting).
    fn has_buffered_frame(&mut self) -> bool {
        match &mut self.link {
            Link::Framed(framed) => framed.codec().has_whole_frame(framed.read_buffer()),
            Link::WebSocket(link) => link.has_message(),
        }
    }
}
