//! The ncnn model format: `.param` (graph, text) + `.bin` (weights).
pub mod bin;
pub mod model;
pub mod param;

pub use model::{Activation, BinaryOpKind, Conv, Crop, EltwiseKind, Interp, Layer, Net, Op, Padding, PoolKind, Pooling};
