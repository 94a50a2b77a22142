//! Pipelines beyond the plain tiled SR one: SRMD(NF) super-resolution, blind denoising, EXIF
//! orientation, frame interpolation (RIFE) and scene-cut detection.
pub mod denoise;
pub mod interp;
pub mod noise;
pub mod orient;
pub mod scenecut;
pub mod srmd;
