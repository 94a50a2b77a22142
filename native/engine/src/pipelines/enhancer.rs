//! The one small trait every pipeline implements, and the per-video state a pipeline may keep
//! between the frames (and batches) of one video.

use super::face::track::FaceTracker;
use crate::raster::{Raster, RasterMut, RasterRef};
use crate::runtime::Runtime;
use lucent_core::{Cancel, Result};

/// The pixel work of one catalog model: one picture in, the picture at the model's scale out
/// (same channel layout and bit depth; alpha is carried by the bicubic resampler).
pub trait Enhancer {
    /// Output side / input side.
    fn scale(&self) -> usize;

    /// Enhance a still picture from `src` into `dst` (dst = src x scale). `progress(done, total)`
    /// in the pipeline's own steps (tiles, faces).
    fn run_into(
        &self,
        rt: &Runtime,
        src: RasterRef<'_>,
        dst: &mut RasterMut<'_>,
        cancel: &Cancel,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<()>;

    /// Enhance one frame of a video, with that video's state. Pipelines that keep no state
    /// between frames run the frame like a still picture (the default).
    fn run_frame(
        &self,
        rt: &Runtime,
        src: RasterRef<'_>,
        dst: &mut RasterMut<'_>,
        _state: &mut VideoState,
        cancel: &Cancel,
    ) -> Result<()> {
        self.run_into(rt, src, dst, cancel, &mut |_, _| {})
    }

    /// [`Enhancer::run_into`] into a new raster (same channels and bit depth as `src`).
    fn run(&self, rt: &Runtime, src: RasterRef<'_>, cancel: &Cancel, progress: &mut dyn FnMut(usize, usize)) -> Result<Raster> {
        let s = self.scale();
        let mut out = Raster::new(src.width * s, src.height * s, src.channels, src.bit_depth())?;
        self.run_into(rt, src, &mut out.as_mut(), cancel, progress)?;
        Ok(out)
    }
}

/// What a pipeline carries from frame to frame of one video (today: the face tracks of the face
/// pipeline). Opaque to callers: [`VideoState::to_bytes`] / [`VideoState::from_bytes`] carry it
/// between the batches of one video (e.g. through a worker pool); a fresh one per video. A blob is
/// only read by the pipeline that wrote it, so models that keep no state ignore it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VideoState {
    /// Face tracks, once a face pipeline ran a frame.
    faces: Option<FaceTracker>,
    /// The blob this state was restored from, until a pipeline reads it.
    carried: Vec<u8>,
}

impl VideoState {
    pub fn new() -> VideoState {
        VideoState::default()
    }

    /// Restore a state from [`VideoState::to_bytes`] (empty: a fresh state). Checked when a
    /// pipeline first reads it (`invalid_argument` if it is not a blob this engine wrote).
    pub fn from_bytes(b: &[u8]) -> VideoState {
        VideoState { faces: None, carried: b.to_vec() }
    }

    /// Whether no pipeline stored anything (nothing to carry to the next batch).
    pub fn is_empty(&self) -> bool {
        self.faces.is_none()
    }

    /// The state as an opaque blob (empty when [`VideoState::is_empty`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.faces.as_ref().map(FaceTracker::to_bytes).unwrap_or_default()
    }

    /// The face tracks, if a face pipeline kept any.
    pub fn faces(&self) -> Option<&FaceTracker> {
        self.faces.as_ref()
    }

    /// The face tracks for the face pipeline: restored from the carried blob on first use, else new.
    pub(crate) fn faces_mut(&mut self) -> Result<&mut FaceTracker> {
        if self.faces.is_none() {
            self.faces = Some(FaceTracker::from_bytes(&std::mem::take(&mut self.carried))?);
        }
        Ok(self.faces.as_mut().expect("set above"))
    }
}
