//! Generates the OTLP profiles messages (`symbolizer::otlp::proto`) from
//! the vendored `.proto` files of opentelemetry-proto v1.10.0
//! (`proto/README.md`): protox compiles them to a descriptor set in Rust,
//! prost-build writes the types from it (no `protoc` needed).

use std::path::Path;

const FILES: [&str; 4] = [
    "opentelemetry/proto/common/v1/common.proto",
    "opentelemetry/proto/resource/v1/resource.proto",
    "opentelemetry/proto/profiles/v1development/profiles.proto",
    "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto",
];

fn main() {
    let root = Path::new("proto");
    for file in FILES {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    let descriptors = protox::compile(FILES, [root]).unwrap_or_else(|e| panic!("compiling the OTLP .proto files: {e}"));
    prost_build::Config::new().compile_fds(descriptors).unwrap_or_else(|e| panic!("generating the OTLP messages: {e}"));
}
