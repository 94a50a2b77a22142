//! The ONNX protobuf types, generated at build time by prost-build from the vendored official
//! `proto/onnx.proto` (see build.rs). Nothing here is written by hand.

#![allow(clippy::all, missing_docs, rustdoc::all)]

include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
