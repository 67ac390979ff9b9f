//! Generates the Rust wire types from `proto/tserver.proto` with protox, so no `protoc` is needed.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let proto_file = proto_dir.join("tserver.proto");
    println!("cargo:rerun-if-changed={}", proto_file.display());

    let descriptors = protox::compile([&proto_file], [&proto_dir])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
