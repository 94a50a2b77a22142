//! Compiles the vendored official `proto/onnx.proto` into Rust types (prost) at build time, with
//! protox as the pure-Rust protobuf compiler (no protoc binary on the build machine).

fn main() {
    println!("cargo:rerun-if-changed=proto/onnx.proto");
    let fds = protox::compile(["onnx.proto"], ["proto"]).expect("proto/onnx.proto compiles");
    prost_build::Config::new().compile_fds(fds).expect("prost-build generates the ONNX types");
}
