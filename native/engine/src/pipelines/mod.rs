//! The pipelines: one per file (a folder for the face pipeline and its parts), each behind the
//! [`Enhancer`] trait and running against a [`crate::runtime::Runtime`]. [`for_model`] is the one
//! place that turns a catalog entry into its pipeline.
//!
//! - `sr.rs`: plain tiled super-resolution (catalog `TiledSr`; its data is a `tiling::SrSpec`)
//! - `custom.rs`: an operator's own network file (bring your own model), no catalog entry
//! - `srmd.rs`: SRMD / SRMDNF (`Srmd`)
//! - `denoise.rs`: blind FFDNet denoising (`Denoise`), with its noise estimator `noise.rs`
//! - `face/`: face / portrait models (`Face`): detector, blend masks, face-crop images, tracks
//! - `interp.rs`: RIFE v4.6 frame interpolation (two frames + t -> frame; catalog `Interp`, run by
//!   `video::interpolate_frames`, not an Enhancer)
//! - `scenecut.rs`: scene-cut detection between consecutive frames (colour-histogram distance)
//! - `segment/`: background removal (U²-Net); `segment/refine.rs` refines the mask's edges
//!
//! A new pipeline: a file here implementing [`Enhancer`], a `catalog::Pipeline` variant holding
//! its data, and an arm in [`for_model`].

pub mod custom;
pub mod denoise;
pub mod face;
pub mod interp;
pub mod noise;
pub mod scenecut;
pub mod segment;
pub mod sr;
pub mod srmd;

mod enhancer;

pub use enhancer::{Enhancer, VideoState};

use crate::catalog::{ModelInfo, Pipeline};
use crate::tiling::SrSpec;
use lucent_core::{Code, Error, Result};

/// The pipeline of catalog model `m`, its data taken from the catalog entry.
pub fn for_model(m: &ModelInfo) -> Result<Box<dyn Enhancer>> {
    Ok(match m.pipeline {
        Pipeline::TiledSr => Box::new(SrSpec::for_model(m)?),
        Pipeline::Srmd => Box::new(srmd::Srmd::for_model(m)?),
        Pipeline::Denoise(_) => Box::new(denoise::Denoise::for_model(m)?),
        Pipeline::Face(_) => Box::new(face::FacePipeline::for_model(m)?),
        Pipeline::Interp => {
            return Err(Error::new(Code::InvalidArgument, format!("model '{}' interpolates between frames: call interpolate_frames", m.name)))
        }
        Pipeline::Unavailable => {
            return Err(Error::new(Code::UnknownModel, format!("model '{}' has no runnable pipeline", m.name)))
        }
    })
}
