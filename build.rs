//! Compiles `proto/subscribe.proto` with protox (a pure-Rust protobuf compiler, so no system
//! `protoc` is needed) and generates the prost types for the Tencent DTS decoder. The encoded
//! descriptor set is written next to the generated code; the Python fallback ships the same
//! bytes (`python/cdc_decode/fallback/subscribe.desc`, checked by a unit test).
use std::{env, fs, path::PathBuf};

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/subscribe.proto");
    let out = PathBuf::from(env::var("OUT_DIR")?);
    let mut compiler = protox::Compiler::new(["proto"])?;
    compiler.include_source_info(false).include_imports(true);
    compiler.open_file("subscribe.proto")?;
    let descriptors = compiler.file_descriptor_set();
    fs::write(out.join("subscribe.desc"), descriptors.encode_to_vec())?;
    prost_build::Config::new()
        // `bytes` fields as `Bytes`: slices of the input buffer, no copies.
        .bytes(["."])
        .compile_fds(descriptors)?;
    Ok(())
}
