//! Background removal (salient-object segmentation, U²-Net): the parts of the pipeline.
//!
//! - `refine.rs`: the edge refinement of the network's coarse mask, guided by the photo (a colour
//!   guided filter; chosen and measured in docs/segmentation.md)
pub mod refine;
