//! `Connection`: the only place that sees bytes. Frames in, frames out.

use std::time::Duration;

use bytes::BytesMut;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio_util::codec::Decoder;
use tokio_util::codec::{Framed, FramedParts};
use tserver_proto::v1::{ClientFrame, ServerFrame};
use tserver_proto::{Decoded, FrameCodec, FrameError, Transport};

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

/// A framed client connection.
#[derive(Debug)]
pub(crate) struct Connection {
    framed: Framed<Transport, FrameCodec<ClientFrame, ServerFrame>>,
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
            framed: Framed::from_parts(parts),
            write_timeout,
            input_closed: false,
        }
    }

    /// Changes the largest frame read from the client from now on; replies keep the limit
    /// given at construction.
    pub(crate) fn set_max_frame(&mut self, max_frame: usize) {
        self.framed.codec_mut().set_max_frame(max_frame);
    }

    /// The next frame; `None` once, when the client shuts its sending side. Cancel-safe:
    /// bytes already read stay buffered for the next call.
    ///
    /// After that `None` nothing more can be read, but the client may only have half-closed
    /// (`shutdown(SHUT_WR)`) and still read its replies. What can still arrive is a reset,
    /// when the client is gone and a reply written to it bounced: the next call waits for
    /// that and returns it as an error, so the calls in flight stop at once.
    pub(crate) async fn read_frame(&mut self) -> Option<Result<Decoded<ClientFrame>, FrameError>> {
        if self.input_closed {
            let gone = self.framed.get_ref().tcp().ready(Interest::ERROR).await;
            let error = match gone {
                Err(error) => error,
                Ok(_) => std::io::Error::from(std::io::ErrorKind::ConnectionReset),
            };
            return Some(Err(FrameError::Io(error)));
        }
        let next = self.framed.next().await;
        self.input_closed = next.is_none();
        next
    }

    /// Buffers a frame for writing; a frame too large to write is refused
    /// (`FrameError::TooLarge`) before any of it is buffered.
    pub(crate) async fn queue(&mut self, frame: ServerFrame) -> Result<(), WriteError> {
        tokio::time::timeout(self.write_timeout, self.framed.feed(frame))
            .await
            .map_err(|_| WriteError::Stalled(self.write_timeout))??;
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
        tokio::time::timeout(self.write_timeout, self.framed.flush())
            .await
            .map_err(|_| WriteError::Stalled(self.write_timeout))??;
        Ok(())
    }

    /// Queues and flushes one frame, waiting at most `limit`: for last words before a close.
    pub(crate) async fn send_final(&mut self, frame: ServerFrame, limit: Duration) {
        let send = async {
            let _ = self.framed.send(frame).await;
        };
        let _ = tokio::time::timeout(limit, send).await;
    }

    /// A whole frame already read from the socket but not yet taken, if any; never reads.
    pub(crate) fn take_buffered_frame(&mut self) -> Option<Decoded<ClientFrame>> {
        let max_frame = self.framed.codec().max_frame();
        FrameCodec::<ClientFrame, ServerFrame>::new(max_frame)
            .decode(self.framed.read_buffer_mut())
            .ok()
            .flatten()
    }

    /// Closes our side, then reads and drops whatever the client still sends, for at most
    /// `linger`. Closing a socket with unread input makes the kernel reset the connection, and
    /// a reset can destroy the last frames before the client reads them (the "lingering close"
    /// of web servers).
    pub(crate) async fn close_gracefully(&mut self, linger: Duration) {
        let stream = self.framed.get_mut();
        let drain = async {
            stream.shutdown().await?;
            let mut scratch = [0u8; 1024];
            while stream.read(&mut scratch).await? != 0 {}
            Ok::<(), std::io::Error>(())
        };
        let _ = tokio::time::timeout(linger, drain).await;
    }

    fn has_buffered_frame(&self) -> bool {
        self.framed.codec().has_whole_frame(self.framed.read_buffer())
    }
}
