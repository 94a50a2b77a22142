//! Lucent engine facade (no napi): the model catalog, tiled pipelines and the process-wide
//! [`Engine`] the napi addon and the bench CLI drive.
pub mod catalog;
pub mod engine;
pub mod face;
pub mod flops;
pub mod photo;
pub mod pipelines;
pub mod raster;
pub mod resample;
pub mod tiling;

pub use catalog::{Category, DenoiseKind, Kind, ModelInfo, PadMode, Pipeline, PrePost, CATALOG};
pub use engine::{guard, BackendChoice, Engine, EngineOptions, LoadedNet, SrSpec};
pub use photo::{probe, EnhanceOptions, EnhanceOutput};
pub use lucent_core::{BackendInfo, Cancel, Code, Error, Result};
pub use raster::{Raster, RasterMut, RasterRef, Samples, SamplesMut, SamplesRef};
