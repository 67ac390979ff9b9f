//! Fuzz target: the frame codec and the protobuf decode of client frames, fed in pieces as a
//! socket would deliver them.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use prost::Message;
use tokio_util::codec::Decoder;
use tserver_proto::v1::{ClientFrame, ServerFrame};
use tserver_proto::{Decoded, FrameCodec, FrameError};

/// A small limit, so oversize prefixes are common in the inputs.
const MAX_FRAME: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&piece_len, stream)) = data.split_first() else {
        return;
    };
    let piece_len = usize::from(piece_len).max(1);
    let mut codec = FrameCodec::<ClientFrame, ServerFrame>::new(MAX_FRAME);
    let mut buffer = BytesMut::new();
    for piece in stream.chunks(piece_len) {
        buffer.extend_from_slice(piece);
        loop {
            match codec.decode(&mut buffer) {
                Ok(Some(Decoded::Message(frame))) => {
                    // What decoded must encode and decode to the same message.
                    let again = ClientFrame::decode(frame.encode_to_vec().as_slice());
                    assert_eq!(again.as_ref(), Ok(&frame));
                }
                Ok(Some(Decoded::Malformed(_))) => {}
                Ok(None) => break,
                Err(FrameError::TooLarge { len, max }) => {
                    assert!(len > max && max == MAX_FRAME);
                    return;
                }
                Err(FrameError::Io(error)) => panic!("no I/O here, yet: {error}"),
            }
        }
        // Waiting for more bytes, the buffer never holds more than one unfinished frame:
        // nothing grows from a declared length.
        assert!(buffer.len() < 4 + MAX_FRAME, "buffered {} bytes", buffer.len());
    }
});
