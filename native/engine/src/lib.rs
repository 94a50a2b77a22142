//! Lucent engine (no napi): the model catalog, the pipelines and the process-wide [`Engine`] the
//! napi addon (native/node) and the bench CLI (native/cli) drive.
//!
//! Layers, each using only the ones above it:
//! - `catalog`: model facts (the only source; `models/catalog.json` is generated from it)
//! - `raster`, `resample`, `orient`, `flops`, `tiling`: pixels, alpha, EXIF orientation, FLOP
//!   counts, tiled execution (+ `SrSpec`, one network's tiled run)
//! - `precision`: the CPU backend's arithmetic per network (`auto` from committed measurements)
//! - `runtime`: backend + loaded networks + tile side, what pipelines run against
//! - `pipelines`: one pipeline per file behind the `Enhancer` trait; `for_model` picks one
//! - `photo`, `video`, `segment`: the photo (bytes), video (frame batches) and background-removal
//!   (bytes) paths
//! - `engine`: the process-wide engine and its entry points
pub mod catalog;
pub mod engine;
pub mod flops;
pub mod orient;
pub mod photo;
pub mod pipelines;
pub mod precision;
pub mod raster;
pub mod resample;
pub mod runtime;
pub mod segment;
pub mod tiling;
pub mod video;

/// The face pipeline's public parts (detector, blend masks, tracks, prior hook).
pub use pipelines::face;

pub use catalog::{Category, DenoiseKind, FaceStyle, Kind, Limits, ModelInfo, PadMode, Pipeline, PriceClass, PrePost, CATALOG};
pub use engine::{guard, probe, BackendChoice, CodecOptions, CpuOptions, Engine, EngineOptions, GpuOptions};
pub use lucent_core::{BackendInfo, Cancel, Code, Error, Result};
pub use photo::{EnhanceOptions, EnhanceOutput};
pub use pipelines::{Enhancer, VideoState};
pub use raster::{Raster, RasterMut, RasterRef, Samples, SamplesMut, SamplesRef};
pub use runtime::{LoadedNet, Runtime};
pub use tiling::SrSpec;
pub use video::{Frames, FramesOutput, InterpOutput};
