//! The face path of the face / portrait models (photo: face_*, face_v2_*, generative_portrait_*;
//! video: face_soft_2x, portrait_restore_*).
//!
//! 1. The whole picture runs through the model's base network at the model's scale (the tiled SR
//!    pipeline: colour through the network, alpha through the bicubic resampler).
//! 2. Faces are detected on the input ([`detect`]: RetinaFace-slim on the engine's backend, on a
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
//! [`FacePrior`] trait is the hook where such a prior plugs in ([`Engine::run_face_with`]): when
//! one is given it replaces the face network for every face crop.

pub mod blend;
pub mod detect;
pub mod image;
pub mod track;

use crate::catalog::{self, Kind, ModelInfo};
use crate::engine::{guard, Engine, SrSpec};
use crate::raster::{Raster, RasterMut, RasterRef};
use blend::{blend_into, face_region, FaceMask, Region};
pub use detect::FaceBox;
use image::Rgb;
use lucent_core::{Cancel, Code, Error, Result};
pub use track::{FaceTracker, Tracked};

/// Longest side (px) of a face crop at the face network's input.
pub const MAX_WORK: usize = 768;

const GENERAL: &str = "sr/realesr-general-x4v3";
const X4PLUS: &str = "sr/realesrgan-x4plus";
const ANIME_X2: &str = "sr/realesr-animevideov3-x2";

/// How one face/portrait model treats the picture and its faces.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaceStyle {
    /// Whole-picture network and its per-tile context margin.
    pub base: &'static str,
    pub base_margin: usize,
    /// Network run on each face crop (its own scale, typically x4) and its margin.
    pub face_net: &'static str,
    pub face_margin: usize,
    /// Weight of the face network's result over the base inside the mask (0..1).
    pub strength: f32,
    /// Faces whose box long side (input px) is below this are enlarged 2x before the face
    /// network (0 = never).
    pub enlarge_below: f32,
}

/// The face style of a catalog name, None for the other models.
pub fn style(kind: Kind, name: &str) -> Option<FaceStyle> {
    let s = |base, base_margin, face_net, face_margin, strength, enlarge_below| {
        Some(FaceStyle { base, base_margin, face_net, face_margin, strength, enlarge_below })
    };
    match (kind, name) {
        // Face Clear: compact general base, GAN faces at full strength.
        (Kind::Photo, "face_2x" | "face_4x") => s(GENERAL, 24, X4PLUS, 64, 1.0, 0.0),
        // Face Natural: the same networks, the GAN face mixed 55 % over the base.
        (Kind::Photo, "face_v2_2x" | "face_v2_4x") => s(GENERAL, 24, X4PLUS, 64, 0.55, 0.0),
        // Generative portrait: the GAN for both, faces under 128 px seen 2x larger.
        (Kind::Photo, "generative_portrait_1x" | "generative_portrait_2x" | "generative_portrait_4x") => {
            s(X4PLUS, 64, X4PLUS, 64, 1.0, 128.0)
        }
        // Video: the video-trained compact base; soft = the general compact net 60 % on faces.
        (Kind::Video, "face_soft_2x") => s(ANIME_X2, 16, GENERAL, 24, 0.6, 0.0),
        (Kind::Video, "portrait_restore_1x" | "portrait_restore_2x") => s(ANIME_X2, 16, X4PLUS, 64, 0.85, 0.0),
        _ => None,
    }
}

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

fn sr_spec(stem: &str, scale: usize, margin: usize) -> Result<SrSpec> {
    let pp = catalog::prepost(stem).ok_or_else(|| Error::new(Code::Internal, format!("no pre/post facts for {stem}")))?;
    if pp.net_scale % scale != 0 {
        return Err(Error::new(Code::Internal, format!("{stem}: scale {scale} does not divide {}", pp.net_scale)));
    }
    Ok(SrSpec {
        stem: stem.to_string(),
        net_scale: pp.net_scale,
        scale,
        pad: pp.pad,
        pad_mode: pp.pad_mode,
        margin: margin.max(pp.pad),
    })
}

fn style_of(m: &ModelInfo) -> Result<FaceStyle> {
    style(m.kind, m.name).ok_or_else(|| Error::new(Code::Internal, format!("model '{}' has no face style", m.name)))
}

impl Engine {
    /// Photo face/portrait model on decoded pixels (no prior).
    pub fn run_face_model(
        &self,
        m: &ModelInfo,
        src: RasterRef<'_>,
        cancel: &Cancel,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Raster> {
        self.run_face_with(m, src, None, cancel, progress)
    }

    /// Photo face/portrait model with an optional face prior replacing the face network.
    pub fn run_face_with(
        &self,
        m: &ModelInfo,
        src: RasterRef<'_>,
        prior: Option<&dyn FacePrior>,
        cancel: &Cancel,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Raster> {
        guard("face pipeline", || {
            let st = style_of(m)?;
            let faces = self.detect_faces(src, cancel)?;
            let nf = faces.len();
            let base = sr_spec(st.base, m.scale, st.base_margin)?;
            let mut total_base = 1usize;
            let mut out = self.run_sr(&base, src, cancel, &mut |d, t| {
                total_base = t;
                progress(d, t + nf)
            })?;
            for (i, f) in faces.iter().enumerate() {
                cancel.check()?;
                self.restore_face(&st, src, &mut out.as_mut(), m.scale, f, st.strength, prior, cancel)?;
                progress(total_base + i + 1, total_base + nf);
            }
            Ok(out)
        })
    }

    /// Enhance face `f` (input px) of `src` and blend it into `dst` (= src x scale) at `weight`.
    #[allow(clippy::too_many_arguments)]
    pub fn restore_face(
        &self,
        st: &FaceStyle,
        src: RasterRef<'_>,
        dst: &mut RasterMut<'_>,
        scale: usize,
        f: &FaceBox,
        weight: f32,
        prior: Option<&dyn FacePrior>,
        cancel: &Cancel,
    ) -> Result<()> {
        let Some(r) = face_region(f, src.width, src.height) else { return Ok(()) };
        let out = r.scaled(scale);
        let face = self.face_pixels(st, src, r, out, f, prior, cancel)?;
        blend_into(dst, out, &face, &FaceMask::new(f, scale as f32), weight);
        Ok(())
    }

    /// The enhanced pixels of crop `r` (input px) at the output region's size.
    #[allow(clippy::too_many_arguments)]
    fn face_pixels(
        &self,
        st: &FaceStyle,
        src: RasterRef<'_>,
        r: Region,
        out: Region,
        f: &FaceBox,
        prior: Option<&dyn FacePrior>,
        cancel: &Cancel,
    ) -> Result<Rgb> {
        let crop = Rgb::crop(src, r.x0, r.y0, r.w, r.h);
        if let Some(p) = prior {
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
        let long = f.width().max(f.height());
        let mut k = if st.enlarge_below > 0.0 && long < st.enlarge_below { 2.0 } else { 1.0 };
        let side = r.w.max(r.h) as f32;
        if side * k > MAX_WORK as f32 {
            k = MAX_WORK as f32 / side;
        }
        let (ww, wh) = (((r.w as f32 * k).round() as usize).max(1), ((r.h as f32 * k).round() as usize).max(1));
        let work = if (ww, wh) == (r.w, r.h) { crop } else { crop.resize(ww, wh) };
        let spec = sr_spec(st.face_net, catalog::prepost(st.face_net).map(|p| p.net_scale).unwrap_or(4), st.face_margin)?;
        let up = self.run_sr(&spec, work.to_raster16()?.as_ref(), cancel, &mut |_, _| {})?;
        let up = Rgb::from_raster(up.as_ref());
        Ok(if (up.w, up.h) == (out.w, out.h) { up } else { up.resize(out.w, out.h) })
    }

    /// Video face/portrait model over `count` packed RGB24 frames, with the caller's tracker
    /// (carry it across the batches of one video; a fresh one per video).
    #[allow(clippy::too_many_arguments)]
    pub fn face_frames(
        &self,
        rgb24: &[u8],
        w: usize,
        h: usize,
        count: usize,
        m: &ModelInfo,
        tracker: &mut FaceTracker,
        cancel: &Cancel,
    ) -> Result<(Vec<u8>, usize, usize)> {
        guard("face frames", || {
            let st = style_of(m)?;
            let base = sr_spec(st.base, m.scale, st.base_margin)?;
            let (ow, oh) = (w * m.scale, h * m.scale);
            let (frame, oframe, mut out) = crate::engine::frame_batch(rgb24, w, h, count, ow, oh)?;
            for i in 0..count {
                cancel.check()?;
                let src = RasterRef::new_u8(w, h, 3, &rgb24[i * frame..(i + 1) * frame])?;
                let mut dst = RasterMut::new_u8(ow, oh, 3, &mut out[i * oframe..(i + 1) * oframe])?;
                self.run_sr_into(&base, src, &mut dst, cancel, &mut |_, _| {})?;
                let dets = self.detect_faces(src, cancel)?;
                for t in tracker.update(w, h, &dets) {
                    self.restore_face(&st, src, &mut dst, m.scale, &t.face, st.strength * t.weight, None, cancel)?;
                }
            }
            Ok((out, ow, oh))
        })
    }

    /// [`Engine::enhance_frames`] with a per-video face tracker: face models use and update it,
    /// the other models ignore it.
    #[allow(clippy::too_many_arguments)]
    pub fn enhance_frames_tracked(
        &self,
        rgb24: &[u8],
        w: usize,
        h: usize,
        count: usize,
        model: &str,
        tracker: &mut FaceTracker,
        cancel: &Cancel,
    ) -> Result<(Vec<u8>, usize, usize)> {
        let m = catalog::lookup(Kind::Video, model)?;
        if style(Kind::Video, m.name).is_some() {
            self.face_frames(rgb24, w, h, count, m, tracker, cancel)
        } else {
            self.enhance_frames(rgb24, w, h, count, model, cancel)
        }
    }
}
