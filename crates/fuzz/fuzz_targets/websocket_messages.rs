//! Fuzz target: a WebSocket text message read as a client frame in protobuf's canonical JSON,
//! as the WebSocket transport reads every message a browser sends.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tserver_proto::v1::ClientFrame;
use tserver_proto::{Decoded, decode_json, encode_json};

fuzz_target!(|data: &[u8]| {
    // A WebSocket text message is UTF-8 by the protocol: the transport never sees other bytes.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Decoded::Message(frame) = decode_json::<ClientFrame>(text) {
        let written = encode_json(&frame);
        // A client may send "NaN" for a double (the call then refuses it); serde_json writes a
        // non-finite number as null, which reads back as nothing. The server never writes one:
        // the plant keeps every value finite.
        if written.contains("null") {
            return;
        }
        // What was read must write and read back to the same message, compared as written.
        match decode_json::<ClientFrame>(&written) {
            Decoded::Message(again) => assert_eq!(encode_json(&again), written),
            Decoded::Malformed(error) => panic!("its own JSON did not read back: {error}: {written}"),
        }
    }
});
