//! The frame codec: a 4-byte big-endian length prefix, then one protobuf message.
//!
//! Unlike `LengthDelimitedCodec`, this codec never reserves buffer space from a declared
//! length: the read buffer grows only as bytes actually arrive, so a client that announces a
//! large frame and sends nothing costs the server nothing. A body that fails to decode is
//! yielded as [`Decoded::Malformed`] rather than as a stream error, because the framing is
//! still intact and the connection can go on.

use std::marker::PhantomData;

use bytes::{Buf, BufMut, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

/// Length of the frame header.
const HEADER_LEN: usize = 4;

/// A frame-level failure that leaves the byte stream unusable, or an I/O error.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// A frame declared (or would need) more bytes than the configured maximum.
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// The length the frame declared or needed.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
    /// The underlying socket failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// One decoded frame body.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded<M> {
    /// The body decoded as the expected message.
    Message(M),
    /// The body was framed correctly but is not a valid message.
    Malformed(MalformedMessage),
}

/// Why a whole message did not decode.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MalformedMessage {
    /// Not valid protobuf of the expected message.
    #[error(transparent)]
    Protobuf(#[from] prost::DecodeError),
    /// Not valid canonical JSON of the expected message (WebSocket text messages).
    #[error("invalid JSON: {0}")]
    Json(String),
}

/// Encodes `Out` messages and decodes `In` messages, both as length-prefixed protobuf.
///
/// The server uses `FrameCodec<ClientFrame, ServerFrame>`, a client the reverse.
#[derive(Debug)]
pub struct FrameCodec<In, Out> {
    /// The largest body read.
    max_frame: usize,
    /// The largest body written; fixed at construction.
    max_written: usize,
    _types: PhantomData<fn(Out) -> In>,
}

impl<In, Out> FrameCodec<In, Out> {
    /// A codec refusing bodies longer than `max_frame` bytes in either direction.
    pub fn new(max_frame: usize) -> Self {
        Self {
            max_frame,
            max_written: max_frame,
            _types: PhantomData,
        }
    }

    /// The largest body this codec reads.
    pub fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// Changes the largest body read from now on, leaving the written limit alone: a server
    /// reads only small frames until a client has logged in.
    pub fn set_max_frame(&mut self, max_frame: usize) {
        self.max_frame = max_frame;
    }

    /// Whether `src` starts with a whole frame this codec would read (one within its limit),
    /// so the next decode yields it without reading more.
    pub fn has_whole_frame(&self, src: &[u8]) -> bool {
        declared_len(src).is_some_and(|len| len <= self.max_frame && src.len() >= HEADER_LEN + len)
    }
}

/// The body length the frame at the start of `src` declares; `None` until its header is in.
fn declared_len(src: &[u8]) -> Option<usize> {
    let header = src.get(..HEADER_LEN)?;
    Some(u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize)
}

impl<In: prost::Message + Default, Out> Decoder for FrameCodec<In, Out> {
    type Item = Decoded<In>;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Self::Item>, FrameError> {
        let Some(len) = declared_len(src) else {
            return Ok(None);
        };
        if len > self.max_frame {
            return Err(FrameError::TooLarge {
                len,
                max: self.max_frame,
            });
        }
        if src.len() < HEADER_LEN + len {
            // Not enough bytes yet. Deliberately no `reserve(len)`: see the module docs.
            return Ok(None);
        }
        src.advance(HEADER_LEN);
        let body = src.split_to(len);
        Ok(Some(match In::decode(body.freeze()) {
            Ok(message) => Decoded::Message(message),
            Err(error) => Decoded::Malformed(error.into()),
        }))
    }
}

impl<In, Out: prost::Message> Encoder<Out> for FrameCodec<In, Out> {
    type Error = FrameError;

    fn encode(&mut self, item: Out, dst: &mut BytesMut) -> Result<(), FrameError> {
        let len = item.encoded_len();
        if len > self.max_written {
            return Err(FrameError::TooLarge {
                len,
                max: self.max_written,
            });
        }
        dst.reserve(HEADER_LEN + len);
        // `len <= max_frame`, and a max above u32::MAX would be refused by every peer anyway.
        dst.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
        item.encode_raw(dst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::{ClientFrame, Ping, ServerFrame, client_frame};
    use futures::StreamExt;
    use prost::Message;
    use tokio_util::codec::FramedRead;

    type ServerSide = FrameCodec<ClientFrame, ServerFrame>;

    fn ping(call_id: u64, nonce: u64) -> ClientFrame {
        ClientFrame {
            call_id,
            body: Some(client_frame::Body::Ping(Ping { nonce })),
        }
    }

    fn framed_bytes(frame: &ClientFrame) -> Vec<u8> {
        let body = frame.encode_to_vec();
        let mut out = (body.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(&body);
        out
    }

    #[tokio::test]
    async fn reassembles_a_frame_split_across_reads() {
        let bytes = framed_bytes(&ping(7, 99));
        let (head, tail) = bytes.split_at(3);
        // A chain reads up to the end of its first part, then the second: two reads.
        let io = tokio::io::AsyncReadExt::chain(head, tail);
        let mut frames = FramedRead::new(io, ServerSide::new(1024));
        let first = frames.next().await.expect("one frame").expect("decodes");
        assert_eq!(first, Decoded::Message(ping(7, 99)));
        assert!(frames.next().await.is_none());
    }

    #[tokio::test]
    async fn yields_every_frame_of_one_read() {
        let mut bytes = framed_bytes(&ping(1, 10));
        bytes.extend(framed_bytes(&ping(2, 20)));
        bytes.extend(framed_bytes(&ping(3, 30)));
        let io = bytes.as_slice();
        let frames: Vec<_> = FramedRead::new(io, ServerSide::new(1024))
            .map(|item| item.expect("decodes"))
            .collect()
            .await;
        assert_eq!(
            frames,
            vec![
                Decoded::Message(ping(1, 10)),
                Decoded::Message(ping(2, 20)),
                Decoded::Message(ping(3, 30)),
            ]
        );
    }

    #[test]
    fn rejects_oversize_prefix_without_reserving_for_it() {
        let mut codec = ServerSide::new(1024);
        let mut buf = BytesMut::from(&u32::MAX.to_be_bytes()[..]);
        let capacity_before = buf.capacity();
        let error = codec.decode(&mut buf).expect_err("oversize prefix");
        assert!(matches!(
            error,
            FrameError::TooLarge { len, max: 1024 } if len == u32::MAX as usize
        ));
        assert_eq!(buf.capacity(), capacity_before);
    }

    #[test]
    fn waits_for_a_declared_body_without_growing_the_buffer() {
        let mut codec = ServerSide::new(1024 * 1024);
        let mut buf = BytesMut::from(&1_000_000u32.to_be_bytes()[..]);
        let capacity_before = buf.capacity();
        assert!(codec.decode(&mut buf).expect("not an error").is_none());
        assert_eq!(buf.capacity(), capacity_before);
    }

    #[test]
    fn a_whole_frame_is_seen_only_once_all_of_it_is_in_and_within_the_limit() {
        let codec = ServerSide::new(1024);
        let bytes = framed_bytes(&ping(7, 99));
        assert!(codec.has_whole_frame(&bytes));
        assert!(!codec.has_whole_frame(&bytes[..bytes.len() - 1]));
        assert!(!codec.has_whole_frame(&bytes[..3]));
        assert!(!ServerSide::new(2).has_whole_frame(&bytes));
    }

    #[test]
    fn malformed_body_is_an_item_not_a_stream_error() {
        let mut codec = ServerSide::new(1024);
        // Field 1 as a length-delimited type with a length running past the body.
        let mut buf = BytesMut::from(&[0, 0, 0, 2, 0x0a, 0x05][..]);
        let item = codec.decode(&mut buf).expect("framing is fine");
        assert!(matches!(item, Some(Decoded::Malformed(_))));
        assert!(buf.is_empty());
    }

    #[test]
    fn empty_body_is_a_default_message() {
        let mut codec = ServerSide::new(1024);
        let mut buf = BytesMut::from(&[0, 0, 0, 0][..]);
        let item = codec.decode(&mut buf).expect("decodes");
        assert_eq!(item, Some(Decoded::Message(ClientFrame::default())));
    }

    #[test]
    fn encode_round_trips_and_refuses_oversize_messages() {
        let mut client = FrameCodec::<ServerFrame, ClientFrame>::new(64);
        let mut buf = BytesMut::new();
        client.encode(ping(5, 6), &mut buf).expect("fits");
        let decoded = ServerSide::new(64).decode(&mut buf).expect("decodes");
        assert_eq!(decoded, Some(Decoded::Message(ping(5, 6))));

        let big = ClientFrame {
            call_id: 1,
            body: Some(client_frame::Body::Chat(crate::v1::ChatRequest {
                query_json: "x".repeat(100),
                stream: false,
            })),
        };
        let mut out = BytesMut::new();
        assert!(matches!(
            client.encode(big, &mut out),
            Err(FrameError::TooLarge { max: 64, .. })
        ));
        assert!(out.is_empty());
    }
}
