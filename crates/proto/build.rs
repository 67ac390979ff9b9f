//! Generates the Rust wire types from `proto/tserver.proto` with protox, so no `protoc` is needed,
//! and their canonical JSON mapping (serde) with pbjson from the same descriptors.

use std::path::PathBuf;

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let proto_file = proto_dir.join("tserver.proto");
    println!("cargo:rerun-if-changed={}", proto_file.display());

    let descriptors = protox::compile([&proto_file], [&proto_dir])?;
    let encoded = descriptors.encode_to_vec();
    // A decision's reply holds a whole proposal, a history reply its three shapes, an alarms
    // reply its lists and flood, an alarm report its figures, a chat reply its envelope, usage,
    // proposals and rendered answer: boxed, so every ServerFrame is not as large.
    prost_build::Config::new()
        .boxed(".tserver.v1.DecideProposalReply.proposal")
        .boxed(".tserver.v1.ServerFrame.body.tag_history")
        .boxed(".tserver.v1.ServerFrame.body.alarms")
        .boxed(".tserver.v1.ServerFrame.body.alarm_report")
        .boxed(".tserver.v1.ServerFrame.body.chat")
        .compile_fds(descriptors)?;
    // Unknown fields are ignored, as protobuf's binary decoding ignores them, so an older
    // server still reads a newer client's messages.
    pbjson_build::Builder::new()
        .register_descriptors(&encoded)?
        .ignore_unknown_fields()
        .build(&[".tserver.v1"])?;
    Ok(())
}
