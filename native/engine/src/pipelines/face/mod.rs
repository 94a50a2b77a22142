//! The face pipeline of the face / portrait models (photo: face_*, face_v2_*, generative_portrait_*;
//! video: face_soft_2x, portrait_restore_*).
//!
//! 1. The whole picture runs through the model's base network at the model's scale (the tiled SR
//!    pipeline: colour through the network, alpha through the bicubic resampler).
//! 2. Faces are detected on the input ([`detect`]: RetinaFace-slim on the runtime's backend, on a
//!    copy whose long side is 320..640).
//! 3. Each face's square context crop ([`blend::face_region`], 1.8x the box) is taken from the
//!    INPUT and enhanced by the style's face network at a working resolution that suits it (small
//!    faces enlarged 2x first for the generative portrait, so the GAN sees them bigger; very large
//!    crops capped at [`MAX_WORK`] px), resampled to the crop's output size, and blended into the
//!    base output with a feathered elliptical mask ([`blend::FaceMask`]) at the style's strength.
//! 4. Video: per-frame detections go through a [`track::FaceTracker`] (temporal smoothing and
//!    fade in/out), which the caller may carry between batches of one video.
//!
//! No face-restoration prior (GFPGAN, CodeFormer, GPEN...) ships in this deployment: the face
//! network is a general SR network applied to the face at a face-friendly working size. The
//! [`FacePrior`] trait is the hook where such a prior plugs in ([`FacePipeline::prior`]): when
//! one is given it replaces the face network for every face crop.
//!
//! The style (networks, margins, strength) is catalog data: `catalog::Pipeline::Face(FaceStyle)`.

pub mod blend;
pub mod detect;
pub mod image;
pub mod track;

use super::enhancer::{Enhancer, VideoState};
use crate::catalog::{self, ModelInfo, Pipeline};
use crate::raster::{RasterMut, RasterRef};
use crate::runtime::Runtime;
use crate::tiling::SrSpec;
use blend::{blend_into, face_region, FaceMask, Region};
pub use crate::catalog::FaceStyle;
pub use detect::{detect_faces, FaceBox};
use image::Rgb;
use lucent_core::{Cancel, Code, Error, Result};
pub use track::{FaceTracker, Tracked};

/// Longest side (px) of a face crop at the face network's input.
pub const MAX_WORK: usize = 768;

/// A face-restoration prior (GFPGAN / CodeFormer class). None ships today; this is the hook.
pub trait FacePrior: Send + Sync {
    fn name(&self) -> &str;
    /// Side of the square face image the prior takes and returns (512 for GFPGAN/CodeFormer).
    fn size(&self) -> usize;
    /// Restore one face: `face` is size x size RGB 0..1 (the square context crop around the
    /// detected box, resampled; `landmarks` are the 5 detector landmarks in its pixels, for priors
    /// that want to align first); returns the restored face at the same size.
    fn restore(&self, face: &Rgb, landmarks: &[[f32; 2]; 5], cancel: &Cancel) -> Result<Rgb>;
}

/// A face/portrait model ready to run: its style, output scale, the tiled specs of its base and
/// face networks, and an optional face prior.
pub struct FacePipeline<'p> {
    pub style: FaceStyle,
    pub scale: usize,
    /// When set, replaces the face network on every face crop.
    pub prior: Option<&'p dyn FacePrior>,
    base: SrSpec,
    face: SrSpec,
}

impl<'p> FacePipeline<'p> {
    /// `style` at output `scale` (no prior).
    pub fn new(style: FaceStyle, scale: usize) -> Result<FacePipeline<'static>> {
        let face_scale = catalog::prepost(style.face_net).map_or(0, |p| p.net_scale);
        Ok(FacePipeline {
            style,
            scale,
            prior: None,
            base: SrSpec::new(style.base, scale, style.base_margin)?,
            face: SrSpec::new(style.face_net, face_scale, style.face_margin)?,
        })
    }

    pub fn for_model(m: &ModelInfo) -> Result<FacePipeline<'static>> {
        match m.pipeline {
            Pipeline::Face(style) => FacePipeline::new(style, m.scale),
            _ => Err(Error::new(Code::Internal, format!("model '{}' has no face style", m.name))),
        }
    }

    /// The same pipeline with a face prior replacing the face network.
    pub fn with_prior<'q>(self, prior: &'q dyn FacePrior) -> FacePipeline<'q> {
        FacePipeline { prior: Some(prior), style: self.style, scale: self.scale, base: self.base, face: self.face }
    }

    /// Enhance face `f` (input px) of `src` and blend it into `dst` (= src x scale) at `weight`.
    pub fn restore_face(
        &self,
        rt: &Runtime,
        src: RasterRef<'_>,
        dst: &mut RasterMut<'_>,
        f: &FaceBox,
        weight: f32,
        cancel: &Cancel,
    ) -> Result<()> {
        let Some(r) = face_region(f, src.width, src.height) else { return Ok(()) };
        let out = r.scaled(self.scale);
        let face = self.face_pixels(rt, src, r, out, f, cancel)?;
        blend_into(dst, out, &face, &FaceMask::new(f, self.scale as f32), weight);
        Ok(())
    }

    /// The enhanced pixels of crop `r` (input px) at the output region's size.
    fn face_pixels(&self, rt: &Runtime, src: RasterRef<'_>, r: Region, out: Region, f: &FaceBox, cancel: &Cancel) -> Result<Rgb> {
        let crop = Rgb::crop(src, r.x0, r.y0, r.w, r.h);
        if let Some(p) = self.prior {
            let n = p.size().max(1);
            let (sx, sy) = (n as f32 / r.w as f32, n as f32 / r.h as f32);
            let lm = f.landmarks.map(|[x, y]| [(x - r.x0 as f32) * sx, (y - r.y0 as f32) * sy]);
            let restored = p.restore(&crop.resize(n, n), &lm, cancel)?;
            if (restored.w, restored.h) != (n, n) {
                return Err(Error::new(Code::Internal, format!("face prior {} returned {}x{}, not {n}x{n}", p.name(), restored.w, restored.h)));
            }
            return Ok(restored.resize(out.w, out.h));
        }
        // Working size: enlarge small faces for the portrait style, cap large crops.
        let st = &self.style;
        let long = f.width().max(f.height());
        let mut k = if st.enlarge_below > 0.0 && long < st.enlarge_below { 2.0 } else { 1.0 };
        let side = r.w.max(r.h) as f32;
        if side * k > MAX_WORK as f32 {
            k = MAX_WORK as f32 / side;
        }
        let (ww, wh) = (((r.w as f32 * k).round() as usize).max(1), ((r.h as f32 * k).round() as usize).max(1));
        let work = if (ww, wh) == (r.w, r.h) { crop } else { crop.resize(ww, wh) };
        let up = self.face.run(rt, work.to_raster16()?.as_ref(), cancel, &mut |_, _| {})?;
        let up = Rgb::from_raster(up.as_ref());
        Ok(if (up.w, up.h) == (out.w, out.h) { up } else { up.resize(out.w, out.h) })
    }
}

impl Enhancer for FacePipeline<'_> {
    fn scale(&self) -> usize {
        self.scale
    }

    /// A still picture: faces detected on it, the base network, then every face at full strength.
    fn run_into(
        &self,
        rt: &Runtime,
        src: RasterRef<'_>,
        dst: &mut RasterMut<'_>,
        cancel: &Cancel,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<()> {
        let faces = detect_faces(rt, src, cancel)?;
        let nf = faces.len();
        let mut total_base = 1usize;
        self.base.run_into(rt, src, dst, cancel, &mut |d, t| {
            total_base = t;
            progress(d, t + nf)
        })?;
        for (i, f) in faces.iter().enumerate() {
            cancel.check()?;
            self.restore_face(rt, src, dst, f, self.style.strength, cancel)?;
            progress(total_base + i + 1, total_base + nf);
        }
        Ok(())
    }

    /// A video frame: the base network, then the faces of the video's tracks (smoothed boxes,
    /// faded weights); the tracks live in `state` from frame to frame.
    fn run_frame(&self, rt: &Runtime, src: RasterRef<'_>, dst: &mut RasterMut<'_>, state: &mut VideoState, cancel: &Cancel) -> Result<()> {
        self.base.run_into(rt, src, dst, cancel, &mut |_, _| {})?;
        let dets = detect_faces(rt, src, cancel)?;
        let tracker = state.faces_mut()?;
        for t in tracker.update(src.width, src.height, &dets) {
            self.restore_face(rt, src, dst, &t.face, self.style.strength * t.weight, cancel)?;
        }
        Ok(())
    }
}
