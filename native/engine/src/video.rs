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

/// Run video model `model` over `frames`. `state` is the video's state (None: a fresh one for
/// this batch only, i.e. face tracks smoothed within the batch).
pub fn enhance_frames(rt: &Runtime, frames: Frames<'_>, model: &str, state: Option<&mut VideoState>, cancel: &Cancel) -> Result<FramesOutput> {
    let m = catalog::lookup(Kind::Video, model)?;
    let pipeline = pipelines::for_model(m)?;
    let (w, h, s) = (frames.width, frames.height, pipeline.scale());
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
