//! The face pipeline of the face / portrait models (photo: face_*, face_v2_*, generative_portrait_*;
//! video: face_soft_2x, portrait_restore_*).
//!
//! 1. The whole picture runs through the model's base network at the model's scale (the tiled SR
//!    pipeline: colour through the network, alpha through the bicubic resampler).
//! 2. Faces are detected on the input ([`detect`]: RetinaFace-slim on the runtime's backend, on a
//!    copy whose long side is 320..640).
//! 3. Each face's square context crop ([`blend::face_region`], 1.8x the box) is taken from the
//!    INPUT and enhanced by the style's face network at a working resolution that suits it (small
//!    faces enlarged 2x first for the generative portrait, so the GAN sees them bigger; crops
//!    capped at the style's `work_max` px: [`work_size`]), resampled to the crop's output size, and
//!    blended into the base output with a feathered elliptical mask ([`blend::FaceMask`]) at the
//!    style's strength.
//! 4. Video: per-frame detections go through a [`track::FaceTracker`] (temporal smoothing and
//!    fade in/out), which the caller may carry between batches of one video. The video styles use
//!    a face network about as cheap as the base (issue 14: x4plus on the faces was 95 % of a
//!    portrait_restore_1x frame); `LUCENT_FACE_PROFILE=1` prints each frame's stages ([`profile`]).
//!
//! No face-restoration prior (GFPGAN, CodeFormer, GPEN...) ships in this deployment: the face
//! network is a general SR network applied to the face at a face-friendly working size. The
//! [`FacePrior`] trait is the hook where such a prior plugs in ([`FacePipeline::prior`]): when
//! one is given it replaces the face network for every face crop.
//!
//! The style (networks, margins, strength, working size) is catalog data: `catalog::Pipeline::Face(FaceStyle)`.
//!
//! Faces are bounded (issue 29: a frame of thousands of small faces cost as much as one): per photo
//! or video frame at most [`MAX_FACES`] faces get the face network, the largest first (by their
//! crop's area), and only while the faces' output regions together stay within [`FACE_ALLOWANCE`]
//! times the picture's own output; the rest keep the base network's output ([`chosen_faces`]).
//! Work meter: the base network is charged its output (the picture x scale), each face its crop's
//! region at the output's scale, before that network runs; so a face model's work is at most
//! (1 + [`FACE_ALLOWANCE`]) x its output, which is what the server's budget allows it
//! (server/jobs/budget.ts).

pub mod blend;
pub mod detect;
pub mod image;
pub mod profile;
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
use profile::{FaceCost, FrameProfile};
use std::time::Instant;
pub use track::{FaceTracker, Tracked};

/// At most this many faces per photo / video frame get the face network (the largest first).
pub const MAX_FACES: usize = 16;

/// The faces' output regions of one photo / frame, summed, stay within this share of the
/// picture's own output (2.0: the faces may cost twice the picture's output; one face's crop is
/// at most the whole picture, and the crops of an honest group photo overlap: 1.04 of the picture
/// for the 4 faces of shared/data/faces/whole/01.jpg, measured by tests/meter.rs).
pub const FACE_ALLOWANCE: f64 = 2.0;

/// Which of the faces `boxes` (input px of a `w` x `h` picture, output at `scale`) get the face
/// network: indices in the given order. Largest crop first, at most [`MAX_FACES`], each taken only
/// while the chosen crops' output pixels stay within [`FACE_ALLOWANCE`] x the picture's output
/// (a face that does not fit is skipped, a smaller one may still fit); degenerate boxes never.
pub fn chosen_faces(boxes: &[&FaceBox], w: usize, h: usize, scale: usize) -> Vec<usize> {
    let s2 = (scale * scale) as u64;
    let allowance = (FACE_ALLOWANCE * (w as u64 * h as u64 * s2) as f64) as u64;
    let mut by_size: Vec<(usize, u64)> = boxes
        .iter()
        .enumerate()
        .filter_map(|(i, b)| face_region(b, w, h).map(|r| (i, r.w as u64 * r.h as u64 * s2)))
        .collect();
    by_size.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let (mut taken, mut sum) = (Vec::new(), 0u64);
    for (i, px) in by_size {
        if taken.len() == MAX_FACES {
            break;
        }
        if sum + px <= allowance {
            sum += px;
            taken.push(i);
        }
    }
    taken.sort_unstable();
    taken
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
        self.restore_face_costed(rt, src, dst, f, weight, cancel).map(|_| ())
    }

    /// [`FacePipeline::restore_face`], returning what it cost (for [`profile`]).
    fn restore_face_costed(
        &self,
        rt: &Runtime,
        src: RasterRef<'_>,
        dst: &mut RasterMut<'_>,
        f: &FaceBox,
        weight: f32,
        cancel: &Cancel,
    ) -> Result<FaceCost> {
        let Some(r) = face_region(f, src.width, src.height) else { return Ok(FaceCost { skipped: true, ..FaceCost::default() }) };
        let mut cost = FaceCost { crop: (r.w, r.h), ..FaceCost::default() };
        if weight <= 0.0 {
            cost.skipped = true;
            return Ok(cost);
        }
        let out = r.scaled(self.scale);
        // The meter: this face's region at the output's scale, before its network runs.
        cancel.charge(out.w as u64 * out.h as u64, &format!("face network {} ({}x{} out)", self.style.face_net, out.w, out.h))?;
        let t = Instant::now();
        let (face, work) = self.face_pixels(rt, src, r, f, cancel)?;
        cost.net_ms = profile::ms_since(t);
        cost.work = work;
        let t = Instant::now();
        let face = if (face.w, face.h) == (out.w, out.h) { face } else { face.resize(out.w, out.h) };
        blend_into(dst, out, &face, &FaceMask::new(f, self.scale as f32), weight);
        cost.blend_ms = profile::ms_since(t);
        Ok(cost)
    }

    /// The face network's input size for crop `r` of face `f` (see [`work_size`]).
    pub fn work_size(&self, r: Region, f: &FaceBox) -> (usize, usize) {
        work_size(&self.style, self.scale, self.face.net_scale, r, f)
    }

    /// The enhanced pixels of crop `r` (input px), at the network's output size (the caller
    /// resamples to the output region `out`), and the network's input size.
    fn face_pixels(&self, rt: &Runtime, src: RasterRef<'_>, r: Region, f: &FaceBox, cancel: &Cancel) -> Result<(Rgb, (usize, usize))> {
        let crop = Rgb::crop(src, r.x0, r.y0, r.w, r.h);
        if let Some(p) = self.prior {
            let n = p.size().max(1);
            let (sx, sy) = (n as f32 / r.w as f32, n as f32 / r.h as f32);
            let lm = f.landmarks.map(|[x, y]| [(x - r.x0 as f32) * sx, (y - r.y0 as f32) * sy]);
            let restored = p.restore(&crop.resize(n, n), &lm, cancel)?;
            if (restored.w, restored.h) != (n, n) {
                return Err(Error::new(Code::Internal, format!("face prior {} returned {}x{}, not {n}x{n}", p.name(), restored.w, restored.h)));
            }
            return Ok((restored, (n, n)));
        }
        let (ww, wh) = self.work_size(r, f);
        let work = if (ww, wh) == (r.w, r.h) { crop } else { crop.resize(ww, wh) };
        // Charged by the caller (restore_face_costed) at the output's scale.
        let work = work.to_raster16()?;
        let mut up = crate::raster::Raster::new(ww * self.face.scale, wh * self.face.scale, work.channels, work.bit_depth())?;
        rt.run_tiled_precharged(&self.face, &crate::tiling::PlainRgb, work.as_ref(), &mut up.as_mut(), cancel, &mut |_, _| {})?;
        Ok((Rgb::from_raster(up.as_ref()), (ww, wh)))
    }
}

/// The face network's input size (w, h) for crop `r` (input px) of face `f`, for `style` at
/// output `scale` with a face network of `net_scale`:
/// - `style.out_density > 0` (video): the crop is resampled so the network's output has
///   `out_density` px per output px: factor k = out_density x scale / net_scale (a 4x network for
///   a 1x output at density 1 sees the crop at a quarter of its size, and its output is the
///   output size: no 4x work thrown away by a 4x downscale);
/// - else (photo): k = 1, or 2 for a face whose box is below `style.enlarge_below`;
/// - then capped so the longest side is at most `style.work_max` px (and at least 1).
pub fn work_size(style: &FaceStyle, scale: usize, net_scale: usize, r: Region, f: &FaceBox) -> (usize, usize) {
    let mut k = if style.out_density > 0.0 {
        style.out_density * scale as f32 / net_scale.max(1) as f32
    } else if style.enlarge_below > 0.0 && f.width().max(f.height()) < style.enlarge_below {
        2.0
    } else {
        1.0
    };
    let side = r.w.max(r.h) as f32;
    let cap = style.work_max.max(1) as f32;
    if side * k > cap {
        k = cap / side;
    }
    (((r.w as f32 * k).round() as usize).max(1), ((r.h as f32 * k).round() as usize).max(1))
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
        let mut prof = FrameProfile::start();
        let t = Instant::now();
        let found = detect_faces(rt, src, cancel)?;
        if let Some(p) = prof.as_mut() {
            p.detect_ms = profile::ms_since(t);
        }
        let chosen = chosen_faces(&found.iter().collect::<Vec<_>>(), src.width, src.height, self.scale);
        let faces: Vec<&FaceBox> = chosen.iter().map(|&i| &found[i]).collect();
        let nf = faces.len();
        let mut total_base = 1usize;
        let t = Instant::now();
        self.base.run_into(rt, src, dst, cancel, &mut |d, t| {
            total_base = t;
            progress(d, t + nf)
        })?;
        if let Some(p) = prof.as_mut() {
            p.base_ms = profile::ms_since(t);
        }
        for (i, f) in faces.iter().enumerate() {
            cancel.check()?;
            let c = self.restore_face_costed(rt, src, dst, f, self.style.strength, cancel)?;
            if let Some(p) = prof.as_mut() {
                p.faces.push(c);
            }
            progress(total_base + i + 1, total_base + nf);
        }
        if let Some(p) = prof {
            eprintln!("{}", p.line(src.width, src.height, self.scale, self.style.face_net));
        }
        Ok(())
    }

    /// A video frame: the base network, then the faces of the video's tracks (smoothed boxes,
    /// faded weights); the tracks live in `state` from frame to frame.
    fn run_frame(&self, rt: &Runtime, src: RasterRef<'_>, dst: &mut RasterMut<'_>, state: &mut VideoState, cancel: &Cancel) -> Result<()> {
        let mut prof = FrameProfile::start();
        let t = Instant::now();
        self.base.run_into(rt, src, dst, cancel, &mut |_, _| {})?;
        if let Some(p) = prof.as_mut() {
            p.base_ms = profile::ms_since(t);
        }
        let t = Instant::now();
        let dets = detect_faces(rt, src, cancel)?;
        if let Some(p) = prof.as_mut() {
            p.detect_ms = profile::ms_since(t);
        }
        let tracker = state.faces_mut()?;
        let tracks: Vec<Tracked> = tracker.update(src.width, src.height, &dets).into_iter().filter(|t| t.weight > 0.0).collect();
        let chosen = chosen_faces(&tracks.iter().map(|t| &t.face).collect::<Vec<_>>(), src.width, src.height, self.scale);
        for t in chosen.iter().map(|&i| &tracks[i]) {
            let c = self.restore_face_costed(rt, src, dst, &t.face, self.style.strength * t.weight, cancel)?;
            if let Some(p) = prof.as_mut() {
                p.faces.push(c);
            }
        }
        if let Some(p) = prof {
            eprintln!("{}", p.line(src.width, src.height, self.scale, self.style.face_net));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn style(out_density: f32, work_max: usize, enlarge_below: f32) -> FaceStyle {
        FaceStyle { base: "b", base_margin: 16, face_net: "f", face_margin: 16, strength: 1.0, enlarge_below, out_density, work_max }
    }

    #[test]
    fn work_size_follows_the_style() {
        let b = |s: f32| FaceBox { x0: 0.0, y0: 0.0, x1: s, y1: s, score: 1.0, landmarks: [[0.0; 2]; 5] };
        let r = |w: usize, h: usize| Region { x0: 0, y0: 0, w, h };
        // Photo: the crop at its input size, small faces 2x, capped.
        assert_eq!(work_size(&style(0.0, 768, 0.0), 2, 4, r(180, 170), &b(100.0)), (180, 170));
        assert_eq!(work_size(&style(0.0, 768, 128.0), 2, 4, r(180, 170), &b(100.0)), (360, 340));
        assert_eq!(work_size(&style(0.0, 768, 128.0), 2, 4, r(900, 450), &b(500.0)), (768, 384));
        // Video: the 4x net's output lands at the output size (density 1) or twice it.
        assert_eq!(work_size(&style(1.0, 768, 128.0), 1, 4, r(360, 300), &b(200.0)), (90, 75));
        assert_eq!(work_size(&style(1.0, 768, 0.0), 2, 4, r(360, 300), &b(200.0)), (180, 150));
        assert_eq!(work_size(&style(2.0, 768, 0.0), 1, 4, r(360, 300), &b(200.0)), (180, 150));
        // ... and capped.
        assert_eq!(work_size(&style(1.0, 120, 0.0), 2, 4, r(360, 300), &b(200.0)), (120, 100));
        assert_eq!(work_size(&style(1.0, 120, 0.0), 1, 4, r(3, 2), &b(2.0)), (1, 1));
    }

    /// The faces bound: at most MAX_FACES, the largest first, within FACE_ALLOWANCE of the
    /// picture's output; degenerate boxes never; the indices in the given order.
    #[test]
    fn chosen_faces_are_bounded_by_count_and_area() {
        let b = |x: f32, y: f32, s: f32| FaceBox { x0: x, y0: y, x1: x + s, y1: y + s, score: 1.0, landmarks: [[0.0; 2]; 5] };
        // 24 faces of 10 px (crop 18 x 18) spread over 1000 x 1000: only the count binds.
        let small: Vec<FaceBox> = (0..24).map(|i| b(20.0 + 40.0 * i as f32, 500.0, 10.0 + (i % 3) as f32)).collect();
        let chosen = chosen_faces(&small.iter().collect::<Vec<_>>(), 1000, 1000, 2);
        assert_eq!(chosen.len(), MAX_FACES);
        assert!(chosen.windows(2).all(|w| w[0] < w[1]), "in the given order: {chosen:?}");
        // The largest (side 12: i % 3 == 2) are all in, and none of the smallest (i % 3 == 0) is.
        assert!((0..24).filter(|i| i % 3 == 2).all(|i| chosen.contains(&i)), "{chosen:?}");
        assert_eq!(chosen.iter().filter(|&&i| i % 3 == 0).count(), 0, "{chosen:?}");
        // Faces that fill the picture: their crops' area binds (each crop alone is most of it).
        let big = [b(10.0, 10.0, 80.0), b(0.0, 0.0, 60.0), b(50.0, 50.0, 40.0), b(0.0, 0.0, 1.0)];
        let chosen = chosen_faces(&big.iter().collect::<Vec<_>>(), 100, 100, 4);
        let area = |i: usize| face_region(&big[i], 100, 100).map_or(0, |r| r.w * r.h);
        let sum: usize = chosen.iter().map(|&i| area(i)).sum();
        assert!(sum as f64 <= FACE_ALLOWANCE * 100.0 * 100.0, "{chosen:?}: {sum}");
        assert!(chosen.contains(&0), "the largest fits alone: {chosen:?}");
        assert!(!chosen.contains(&3), "a degenerate box is never restored");
        assert!(chosen.len() < 3, "{chosen:?}");
    }

    /// Video face models never enlarge a crop and cap it at their work_max.
    #[test]
    fn video_face_crops_are_never_enlarged() {
        let f = FaceBox { x0: 0.0, y0: 0.0, x1: 60.0, y1: 60.0, score: 1.0, landmarks: [[0.0; 2]; 5] };
        let mut n = 0;
        for m in catalog::CATALOG.iter().filter(|m| m.kind == catalog::Kind::Video) {
            let Pipeline::Face(st) = m.pipeline else { continue };
            let p = FacePipeline::for_model(m).unwrap();
            for side in [20usize, 100, 360, 1000] {
                let (ww, wh) = p.work_size(Region { x0: 0, y0: 0, w: side, h: side }, &f);
                assert!(ww <= side && ww.max(wh) <= st.work_max, "{}: {side} -> {ww}x{wh}", m.name);
            }
            n += 1;
        }
        assert_eq!(n, 3);
    }
}
