//! `WebSocketLink`: a connection's frames over a WebSocket, for `Connection`. Each WebSocket
//! message is one frame: a text message is its canonical JSON (pbjson), a binary message its
//! protobuf bytes. Replies take the form of the client's last message (JSON until a program
//! sends binary), so a browser reads JSON and a program protobuf. A reply longer than
//! [`FRAGMENT`] goes in fragments.

use bytes::Bytes;
use futures::{FutureExt, SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use prost::Message as _;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tokio_tungstenite::tungstenite::{self, Message};
use tserver_proto::v1::{ClientFrame, ServerFrame};
use tserver_proto::{Decoded, FrameError, MalformedMessage};

/// A browser's (or a program's) WebSocket, upgraded by the HTTP surface.
pub(crate) type BrowserSocket = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// The longest frame written: a longer message goes in fragments of this size. The WebSocket
/// library keeps its write buffer at the size of the largest frame it wrote, for the socket's
/// life, so whole messages would leave each socket holding its largest reply (a subscription's
/// first values: 20 KiB and more).
pub(crate) const FRAGMENT: usize = 4 * 1024;

/// A frame read from the socket, and whether its message was binary (replies take its form
/// once the session takes it).
type Read = Option<Result<(Decoded<ClientFrame>, bool), FrameError>>;

/// One client's WebSocket, carrying frames.
#[derive(Debug)]
pub(super) struct WebSocketLink {
    socket: BrowserSocket,
    /// The largest message read (its bytes, JSON or protobuf).
    max_read: usize,
    /// The largest frame written (its protobuf size, as on TCP).
    max_written: usize,
    /// The client's last message taken was binary: reply in protobuf.
    binary: bool,
    /// What a look at the socket found already there and the session has not taken yet.
    peeked: Option<Read>,
    /// The close owed to a client that broke the protocol, sent before its error is read.
    owed_close: Option<CloseFrame>,
}

/// How long the close owed to a client that broke the protocol may take to send.
const OWED_CLOSE_LIMIT: std::time::Duration = std::time::Duration::from_secs(1);

impl WebSocketLink {
    /// Frames over `socket`, refusing messages longer than `max_frame` bytes (the upgrade
    /// bounded the socket's own buffers too).
    pub(super) fn new(socket: BrowserSocket, max_frame: usize) -> Self {
        Self {
            socket,
            max_read: max_frame,
            max_written: max_frame,
            binary: false,
            peeked: None,
            owed_close: None,
        }
    }

    pub(super) fn set_max_read(&mut self, max_frame: usize) {
        self.max_read = max_frame;
    }

    /// The next frame; `None` when the client closes. Cancel-safe: a message is taken whole
    /// or not at all.
    pub(super) async fn read(&mut self) -> Option<Result<Decoded<ClientFrame>, FrameError>> {
        let next = match self.peeked.take() {
            Some(peeked) => peeked,
            None => self.read_socket().await,
        };
        if let Some(close) = self.owed_close.take() {
            // Told why, with the code RFC 6455 gives it, before the connection ends.
            let _ =
                tokio::time::timeout(OWED_CLOSE_LIMIT, self.socket.send(Message::Close(Some(close)))).await;
        }
        Some(next?.map(|(decoded, binary)| {
            self.binary = binary;
            decoded
        }))
    }

    /// Whether a whole message has arrived and waits to be taken; looks at the socket without
    /// waiting (what it finds is kept for [`read`](Self::read)).
    pub(super) fn has_message(&mut self) -> bool {
        if self.peeked.is_none() {
            self.peeked = self.read_socket().now_or_never();
        }
        matches!(self.peeked, Some(Some(Ok(_))))
    }

    /// A message that has already arrived, if any, without waiting for one.
    pub(super) fn take_message(&mut self) -> Option<Decoded<ClientFrame>> {
        if !self.has_message() {
            return None;
        }
        match self.peeked.take() {
            Some(Some(Ok((decoded, binary)))) => {
                self.binary = binary;
                Some(decoded)
            }
            other => {
                self.peeked = other;
                None
            }
        }
    }

    async fn read_socket(&mut self) -> Read {
        loop {
            let message = match self.socket.next().await? {
                Ok(message) => message,
                Err(error) => {
                    let (error, close) = read_error(error, self.max_read);
                    self.owed_close = close;
                    return Some(Err(error));
                }
            };
            let decoded = match message {
                Message::Text(text) => self
                    .within_limit(text.len())
                    .map(|()| (tserver_proto::decode_json(text.as_str()), false)),
                Message::Binary(bytes) => self.within_limit(bytes.len()).map(|()| {
                    let decoded = match ClientFrame::decode(bytes) {
                        Ok(frame) => Decoded::Message(frame),
                        Err(error) => Decoded::Malformed(MalformedMessage::Protobuf(error)),
                    };
                    (decoded, true)
                }),
                // The WebSocket library answers pings itself, and reads fragments whole.
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
                Message::Close(_) => return None,
            };
            return Some(decoded);
        }
    }

    /// `Ok` when a message of `len` bytes may be read.
    fn within_limit(&self, len: usize) -> Result<(), FrameError> {
        if len > self.max_read {
            return Err(FrameError::TooLarge {
                len,
                max: self.max_read,
            });
        }
        Ok(())
    }

    /// Buffers a frame, as one message in fragments of at most [`FRAGMENT`] bytes; a frame too
    /// large to write is refused before any of it is buffered.
    pub(super) async fn queue(&mut self, frame: ServerFrame) -> Result<(), FrameError> {
        let len = frame.encoded_len();
        if len > self.max_written {
            return Err(FrameError::TooLarge {
                len,
                max: self.max_written,
            });
        }
        let (mut rest, kind) = if self.binary {
            (Bytes::from(frame.encode_to_vec()), Data::Binary)
        } else {
            (Bytes::from(tserver_proto::encode_json(&frame)), Data::Text)
        };
        // A slow reader keeps the write waiting: only the encoded message waits with it, each
        // fragment a view of it. A text fragment may end inside a character: RFC 6455 checks
        // the UTF-8 of the whole message.
        drop(frame);
        let mut opcode = OpCode::Data(kind);
        loop {
            let fragment = rest.split_to(rest.len().min(FRAGMENT));
            let last = rest.is_empty();
            self.socket
                .feed(Message::Frame(Frame::message(fragment, opcode, last)))
                .await
                .map_err(write_error)?;
            if last {
                return Ok(());
            }
            opcode = OpCode::Data(Data::Continue);
        }
    }

    /// Sends everything buffered.
    pub(super) async fn flush(&mut self) -> Result<(), FrameError> {
        self.socket.flush().await.map_err(write_error)
    }

    /// Sends a close, then reads and drops what the client still sends until it closes too.
    pub(super) async fn close(&mut self) {
        let close = Message::Close(Some(CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        }));
        if self.socket.send(close).await.is_err() {
            return;
        }
        while let Some(Ok(_)) = self.socket.next().await {}
    }
}

/// A read failure as the session knows them (a message over the socket's own size bound is
/// too large, anything else is the transport failing), and the close a client that broke the
/// protocol is owed: 1002 for a protocol violation (an unmasked frame, reserved bits, an
/// unknown opcode, an oversized control frame), 1007 for text that is not UTF-8, 1009 for
/// a frame past the socket's buffers.
fn read_error(error: tungstenite::Error, max: usize) -> (FrameError, Option<CloseFrame>) {
    let owed = |code, error: &tungstenite::Error| {
        // A close reason may hold 123 bytes.
        let mut reason = error.to_string();
        while reason.len() > 123 {
            reason.pop();
        }
        Some(CloseFrame {
            code,
            reason: reason.into(),
        })
    };
    match error {
        tungstenite::Error::Capacity(tungstenite::error::CapacityError::MessageTooLong { size, .. }) => {
            (FrameError::TooLarge { len: size, max }, None)
        }
        ref violation @ tungstenite::Error::Protocol(_) => {
            let close = owed(CloseCode::Protocol, violation);
            (FrameError::Io(std::io::Error::other(error)), close)
        }
        ref invalid @ tungstenite::Error::Utf8(_) => {
            let close = owed(CloseCode::Invalid, invalid);
            (FrameError::Io(std::io::Error::other(error)), close)
        }
        ref large @ tungstenite::Error::Capacity(_) => {
            let close = owed(CloseCode::Size, large);
            (FrameError::Io(std::io::Error::other(error)), close)
        }
        error => (FrameError::Io(std::io::Error::other(error)), None),
    }
}

fn write_error(error: tungstenite::Error) -> FrameError {
    FrameError::Io(std::io::Error::other(error))
}
