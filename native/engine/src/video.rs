//! The video path: batches of packed RGB24 frames through a video model's pipeline, frame by
//! frame, with the video's [`VideoState`] carried from frame to frame (and, by the caller, from
//! batch to batch). [`crate::Engine::enhance_frames`] is its entry point.

use crate::catalog::{self, Kind};
use crate::pipelines::{self, VideoState};
use crate::raster::{RasterMut, RasterRef};
use crate::runtime::Runtime;
use lucent_core::{Cancel, Code, Error, Result};

/// `count` packed RGB24 frames of `width` x `height`.
#[derive(Debug, Clone, Copy)]
pub struct Frames<'a> {
    pub rgb24: &'a [u8],
    pub width: usize,
    pub height: usize,
    pub count: usize,
}

impl<'a> Frames<'a> {
    pub fn new(rgb24: &'a [u8], width: usize, height: usize, count: usize) -> Frames<'a> {
        Frames { rgb24, width, height, count }
    }
}

/// The enhanced frames: packed RGB24, `width` x `height` each.
#[derive(Debug, Clone)]
pub struct FramesOutput {
    pub rgb24: Vec<u8>,
    pub width: usize,
    pub height: usize,
}

/// Per-frame megapixel limits of a video model: `max_in_mp` for the decoded frame (None: none of
/// its own), `max_out_mp` for the frame the network makes (input x scale). Catalog video models:
/// [`catalog::VIDEO_LIMITS`] (36 MP out); an own model: the limits its registry gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLimits {
    pub max_in_mp: Option<u32>,
    pub max_out_mp: u32,
}

impl FrameLimits {
    /// The catalog's video limits.
    pub fn catalog() -> FrameLimits {
        match catalog::VIDEO_LIMITS {
            catalog::Limits::Video { max_out_mp, .. } => FrameLimits { max_in_mp: None, max_out_mp },
            catalog::Limits::Photo { max_in_mp, max_out_mp } => FrameLimits { max_in_mp: Some(max_in_mp), max_out_mp },
        }
    }

    /// `image_too_large` when a `w` x `h` frame at `scale` is over a limit (checked before any
    /// output is allocated or any network runs).
    pub fn check(&self, w: usize, h: usize, scale: usize) -> Result<()> {
        let inp = w as u64 * h as u64;
        let out = inp.saturating_mul((scale * scale) as u64);
        if let Some(m) = self.max_in_mp {
            if inp > m as u64 * 1_000_000 {
                return Err(Error::new(Code::ImageTooLarge, format!("frame {w}x{h} is {:.1} MP, over the {m} MP input limit", inp as f64 / 1e6)));
            }
        }
        if out > self.max_out_mp as u64 * 1_000_000 {
            return Err(Error::new(
                Code::ImageTooLarge,
                format!("frame {w}x{h} x{scale} is {:.1} MP out, over the {} MP limit per frame", out as f64 / 1e6, self.max_out_mp),
            ));
        }
        Ok(())
    }
}

/// Run video model `model` over `frames`. `state` is the video's state (None: a fresh one for
/// this batch only, i.e. face tracks smoothed within the batch). Frames over the catalog's
/// per-frame limit ([`FrameLimits::catalog`]) are refused with `image_too_large`.
pub fn enhance_frames(rt: &Runtime, frames: Frames<'_>, model: &str, state: Option<&mut VideoState>, cancel: &Cancel) -> Result<FramesOutput> {
    let m = catalog::lookup(Kind::Video, model)?;
    run_frames(rt, frames, pipelines::for_model(m)?.as_ref(), state, FrameLimits::catalog(), cancel)
}

/// Bring your own model: [`enhance_frames`] through an operator's network file (see
/// [`crate::pipelines::custom`]; `multiple`: the side multiple its input needs), within `limits`.
pub fn enhance_frames_custom(rt: &Runtime, frames: Frames<'_>, path: &str, multiple: usize, limits: FrameLimits, cancel: &Cancel) -> Result<FramesOutput> {
    let pipeline = crate::pipelines::custom::CustomSr::open(rt, path, multiple)?;
    run_frames(rt, frames, &pipeline, None, limits, cancel)
}

/// The frames through `pipeline`; the pipeline charges the work meter per network run.
fn run_frames(
    rt: &Runtime,
    frames: Frames<'_>,
    pipeline: &dyn crate::pipelines::Enhancer,
    state: Option<&mut VideoState>,
    limits: FrameLimits,
    cancel: &Cancel,
) -> Result<FramesOutput> {
    let (w, h, s) = (frames.width, frames.height, pipeline.scale());
    limits.check(w, h, s)?;
    let (ow, oh) = (w * s, h * s);
    let (frame, oframe, mut out) = frame_batch(frames, ow, oh)?;
    let mut fresh = VideoState::new();
    let state = state.unwrap_or(&mut fresh);
    for i in 0..frames.count {
        cancel.check()?;
        let src = RasterRef::new_u8(w, h, 3, &frames.rgb24[i * frame..(i + 1) * frame])?;
        let mut dst = RasterMut::new_u8(ow, oh, 3, &mut out[i * oframe..(i + 1) * oframe])?;
        pipeline.run_frame(rt, src, &mut dst, state, cancel)?;
    }
    Ok(FramesOutput { rgb24: out, width: ow, height: oh })
}

/// Checks that `frames` holds `count` packed RGB24 frames of its size and allocates the output
/// batch (`count` frames of `ow` x `oh`) without aborting on failure. Returns (input frame bytes,
/// output frame bytes, zeroed output buffer).
fn frame_batch(frames: Frames<'_>, ow: usize, oh: usize) -> Result<(usize, usize, Vec<u8>)> {
    let Frames { rgb24, width: w, height: h, count } = frames;
    let frame = w
        .checked_mul(h)
        .and_then(|p| p.checked_mul(3))
        .filter(|&f| f > 0)
        .ok_or_else(|| Error::new(Code::InvalidArgument, format!("bad frame size {w}x{h}")))?;
    if frame.checked_mul(count) != Some(rgb24.len()) {
        return Err(Error::new(Code::InvalidArgument, format!("{} bytes is not {count} RGB24 frames of {w}x{h}", rgb24.len())));
    }
    let oframe = ow * oh * 3;
    let total = oframe.checked_mul(count).ok_or_else(|| Error::new(Code::ImageTooLarge, "output too large"))?;
    let mut out = Vec::new();
    out.try_reserve_exact(total).map_err(|_| Error::new(Code::ImageTooLarge, format!("cannot allocate {total} bytes")))?;
    out.resize(total, 0u8);
    Ok((frame, oframe, out))
}

/// The frames [`interpolate_frames`] made: packed RGB24 at the input size, `count` of them.
#[derive(Debug, Clone)]
pub struct InterpOutput {
    pub rgb24: Vec<u8>,
    pub width: usize,
    pub height: usize,
    pub count: usize,
    /// Indices (into the output) of the frames that fell between two frames of a scene cut and were
    /// therefore copied from the nearer side instead of interpolated.
    pub cuts: Vec<usize>,
}

/// Frame-rate conversion of one batch with RIFE v4.6 (pipelines/interp.rs): one output frame per
/// entry of `positions`, each a position in the batch's frame index space, `0 <= p <= count - 1`:
/// `p = i + t` is the frame at time `t` between frames `i` and `i + 1` (a whole number copies
/// frame `p`). A pair that [`scenecut::SceneCutDetector`]'s measure calls a cut is never blended:
/// the nearer frame is copied (t < 0.5: frame i, else i + 1) and the output index listed in
/// `cuts`. Batches of one video overlap by one frame (the caller repeats the last frame of a
/// batch as the first of the next), so every pair is seen whole.
pub fn interpolate_frames(rt: &Runtime, frames: Frames<'_>, positions: &[f64], cancel: &Cancel) -> Result<InterpOutput> {
    use crate::pipelines::interp::{Rife, MODEL_STEM};
    use crate::pipelines::scenecut::{FrameSignature, DEFAULT_THRESHOLD};
    let (w, h, n) = (frames.width, frames.height, frames.count);
    if n == 0 {
        return Err(Error::new(Code::InvalidArgument, "no frames to interpolate between"));
    }
    // RIFE runs at the frames' own size: the catalog's per-frame limit (scale 1).
    FrameLimits::catalog().check(w, h, 1)?;
    // Checks the input; the output batch holds one frame per position.
    let (frame, _, mut out) = frame_batch(Frames { count: n, ..frames }, 0, 0)?;
    let total = frame.checked_mul(positions.len()).ok_or_else(|| Error::new(Code::ImageTooLarge, "output too large"))?;
    out.try_reserve_exact(total).map_err(|_| Error::new(Code::ImageTooLarge, format!("cannot allocate {total} bytes")))?;
    out.resize(total, 0u8);
    let last = (n - 1) as f64;
    for (k, &p) in positions.iter().enumerate() {
        if !(p.is_finite() && (0.0..=last).contains(&p)) {
            return Err(Error::new(Code::InvalidArgument, format!("position {k} = {p} is outside 0..={last}")));
        }
    }
    let src = |i: usize| RasterRef::new_u8(w, h, 3, &frames.rgb24[i * frame..(i + 1) * frame]);
    let mut sigs: Vec<Option<FrameSignature>> = vec![None; n];
    let mut rife: Option<Rife> = None;
    let mut cuts = Vec::new();
    for (k, &p) in positions.iter().enumerate() {
        cancel.check()?;
        let i = (p.floor() as usize).min(n - 1);
        let t = p - i as f64;
        let dst = &mut out[k * frame..(k + 1) * frame];
        if t == 0.0 {
            dst.copy_from_slice(&frames.rgb24[i * frame..(i + 1) * frame]);
            continue;
        }
        for j in [i, i + 1] {
            if sigs[j].is_none() {
                sigs[j] = Some(FrameSignature::of(src(j)?)?);
            }
        }
        let d = sigs[i].as_ref().expect("set").distance(sigs[i + 1].as_ref().expect("set"));
        if d >= DEFAULT_THRESHOLD {
            let j = if t < 0.5 { i } else { i + 1 };
            dst.copy_from_slice(&frames.rgb24[j * frame..(j + 1) * frame]);
            cuts.push(k);
            continue;
        }
        if rife.is_none() {
            let l = rt.network(MODEL_STEM)?;
            rife = Some(Rife::with_prepared(rt.backend().as_ref(), &l.net, l.prepared)?);
        }
        // The meter: one interpolated frame's pixels, before RIFE runs.
        cancel.charge(w as u64 * h as u64, &format!("RIFE ({w}x{h} out)"))?;
        let mut d = RasterMut::new_u8(w, h, 3, dst)?;
        rife.as_ref().expect("set").interpolate_into(src(i)?, src(i + 1)?, t as f32, &mut d, cancel, &mut |_, _| {})?;
    }
    Ok(InterpOutput { rgb24: out, width: w, height: h, count: positions.len(), cuts })
}
