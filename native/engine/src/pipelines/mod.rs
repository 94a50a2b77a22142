//! Pipelines beyond the plain tiled SR one: SRMD(NF) super-resolution, blind denoising, EXIF
//! orientation.
pub mod denoise;
pub mod noise;
pub mod orient;
pub mod srmd;
