//! Resampling.
//! - Alpha plane: the networks only see colour, so the alpha plane is upscaled on its own with a
//!   separable bicubic (Catmull-Rom, a = -0.5) filter, pixel-centre aligned, edges clamped, written
//!   straight into the destination's alpha channel one output row at a time (memory: one
//!   input-width row of floats).
//! - [`resize`]: a whole raster to any output size (the photo path's `target_width/height`):
//!   separable, pixel-centre aligned, alpha premultiplied while filtering; Lanczos3 (its window
//!   stretched by the ratio when downscaling, so it stays a low-pass filter), area averaging from
//!   [`AREA_FROM_RATIO`] down. Memory: a window of horizontally resampled rows (floats), never a
//!   whole float image.
//!
//! Hand-written rather than `image::imageops::resize` (already a dependency of lucent-codec): that
//! one works on `ImageBuffer`s (a copy of the engine's interleaved 8/16-bit rasters each way), does
//! not premultiply alpha (transparent pixels' colour bleeds into edges) and cannot be cancelled.

use crate::raster::{Raster, RasterMut, RasterRef, Samples, SamplesRef};
use lucent_core::{Cancel, Code, Error, Result};
use std::collections::VecDeque;

/// Catmull-Rom (a = -0.5) cubic kernel; shared by the alpha resampler and the face path.
#[inline]
pub(crate) fn cubic(x: f32) -> f32 {
    const A: f32 = -0.5;
    let x = x.abs();
    if x <= 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A
    } else {
        0.0
    }
}

/// For each output coordinate: 4 (clamped) source indices and their weights (sum 1).
fn taps(n_in: usize, n_out: usize) -> Vec<([usize; 4], [f32; 4])> {
    let scale = n_in as f32 / n_out as f32;
    (0..n_out)
        .map(|o| {
            let x = (o as f32 + 0.5) * scale - 0.5;
            let x0 = x.floor();
            let f = x - x0;
            let mut idx = [0usize; 4];
            let mut wt = [0f32; 4];
            for k in 0..4 {
                let i = x0 as isize - 1 + k as isize;
                idx[k] = i.clamp(0, n_in as isize - 1) as usize;
                wt[k] = cubic(f - (k as f32 - 1.0));
            }
            let sum: f32 = wt.iter().sum();
            wt.iter_mut().for_each(|v| *v /= sum);
            (idx, wt)
        })
        .collect()
}

/// Upscale (or copy, at equal size) `src`'s alpha into `dst`'s alpha. No-op when `dst` has no alpha;
/// opaque when `src` has none.
pub fn resample_alpha(src: RasterRef<'_>, dst: &mut RasterMut<'_>, cancel: &Cancel) -> Result<()> {
    if !dst.has_alpha() {
        return Ok(());
    }
    let ac = dst.channels - 1;
    let (dw, dh) = (dst.width, dst.height);
    if !src.has_alpha() {
        for y in 0..dh {
            for x in 0..dw {
                dst.set(x, y, ac, 1.0);
            }
        }
        return Ok(());
    }
    if src.width == 0 || src.height == 0 {
        return Err(Error::new(Code::InvalidArgument, "empty image"));
    }
    if src.width == dw && src.height == dh {
        for y in 0..dh {
            for x in 0..dw {
                dst.set(x, y, ac, src.alpha(x, y));
            }
        }
        return Ok(());
    }
    let hx = taps(src.width, dw);
    let vy = taps(src.height, dh);
    let mut row = vec![0f32; src.width];
    for (y, (yi, yw)) in vy.iter().enumerate() {
        if y % 64 == 0 {
            cancel.check()?;
        }
        for (x, r) in row.iter_mut().enumerate() {
            *r = (0..4).map(|k| yw[k] * src.alpha(x, yi[k])).sum();
        }
        for (x, (xi, xw)) in hx.iter().enumerate() {
            let v: f32 = (0..4).map(|k| xw[k] * row[xi[k]]).sum();
            dst.set(x, y, ac, v);
        }
    }
    Ok(())
}

/// Lanczos kernel with a = 3 (windowed sinc).
#[inline]
pub fn lanczos3(x: f32) -> f32 {
    let x = x.abs();
    if x < 1e-6 {
        1.0
    } else if x < 3.0 {
        let px = std::f32::consts::PI * x;
        3.0 * px.sin() * (px / 3.0).sin() / (px * px)
    } else {
        0.0
    }
}

/// Downscaling by this ratio (input / output, per axis) or more averages areas (a box over each
/// output pixel's footprint) instead of a stretched Lanczos3: as sharp at such ratios, and cheaper.
pub const AREA_FROM_RATIO: f64 = 3.0;

/// The filter [`resize`] uses along one axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResizeFilter {
    Lanczos3,
    Area,
}

impl ResizeFilter {
    pub fn for_axis(n_in: usize, n_out: usize) -> ResizeFilter {
        if n_in as f64 >= n_out as f64 * AREA_FROM_RATIO { ResizeFilter::Area } else { ResizeFilter::Lanczos3 }
    }
}

/// One axis: for each output index, the first source index and its weights (sum 1).
pub fn axis_weights(n_in: usize, n_out: usize) -> Vec<(usize, Vec<f32>)> {
    let ratio = n_in as f64 / n_out as f64;
    let filter = ResizeFilter::for_axis(n_in, n_out);
    (0..n_out)
        .map(|o| {
            let (lo, hi, mut w): (usize, usize, Vec<f32>) = match filter {
                ResizeFilter::Area => {
                    let (a, b) = (o as f64 * ratio, (o + 1) as f64 * ratio);
                    let (lo, hi) = (a.floor() as usize, (b.ceil() as usize).min(n_in));
                    let w = (lo..hi).map(|i| ((b.min(i as f64 + 1.0) - a.max(i as f64)).max(0.0)) as f32).collect();
                    (lo, hi, w)
                }
                ResizeFilter::Lanczos3 => {
                    let fscale = ratio.max(1.0);
                    let centre = (o as f64 + 0.5) * ratio;
                    let support = 3.0 * fscale;
                    let lo = (centre - support).floor().max(0.0) as usize;
                    let hi = ((centre + support).ceil() as usize).min(n_in);
                    let w = (lo..hi).map(|i| lanczos3(((i as f64 + 0.5 - centre) / fscale) as f32)).collect();
                    (lo, hi, w)
                }
            };
            debug_assert_eq!(w.len(), hi - lo);
            let sum: f32 = w.iter().sum();
            if sum.abs() > 1e-8 {
                w.iter_mut().for_each(|v| *v /= sum);
            }
            // Trim zero-weight taps at the ends (area windows touching a boundary exactly).
            let first = w.iter().position(|v| *v != 0.0).unwrap_or(0);
            let last = w.iter().rposition(|v| *v != 0.0).map_or(first + 1, |p| p + 1);
            (lo + first, w[first..last].to_vec())
        })
        .collect()
}

/// Row `y` of `src` as floats 0..1, colour premultiplied by alpha when there is alpha.
fn row_premultiplied(src: &RasterRef<'_>, y: usize, out: &mut Vec<f32>) {
    let c = src.channels;
    let n = src.width * c;
    out.clear();
    match src.samples {
        SamplesRef::U8(v) => out.extend(v[y * n..(y + 1) * n].iter().map(|&s| s as f32 * (1.0 / 255.0))),
        SamplesRef::U16(v) => out.extend(v[y * n..(y + 1) * n].iter().map(|&s| s as f32 * (1.0 / 65535.0))),
    }
    if src.has_alpha() {
        for px in out.chunks_exact_mut(c) {
            let a = px[c - 1];
            px[..c - 1].iter_mut().for_each(|v| *v *= a);
        }
    }
}

/// One row's horizontal pass, `C` channels per pixel (a constant, so the taps loop stays in registers).
fn horizontal<const C: usize>(line: &[f32], hx: &[(usize, Vec<f32>)], out: &mut [f32]) {
    for ((x0, wx), o) in hx.iter().zip(out.chunks_exact_mut(C)) {
        let taps = &line[x0 * C..(x0 + wx.len()) * C];
        let mut acc = [0f32; C];
        for (w, p) in wx.iter().zip(taps.chunks_exact(C)) {
            for ch in 0..C {
                acc[ch] += w * p[ch];
            }
        }
        o.copy_from_slice(&acc);
    }
}

/// `src` resized to `width` x `height` (same channels and bit depth). See the module doc.
pub fn resize(src: RasterRef<'_>, width: usize, height: usize, cancel: &Cancel) -> Result<Raster> {
    if width == 0 || height == 0 || src.width == 0 || src.height == 0 {
        return Err(Error::new(
            Code::InvalidArgument,
            format!("cannot resize {}x{} to {width}x{height}", src.width, src.height),
        ));
    }
    let c = src.channels;
    let mut out = Raster::new(width, height, c, src.bit_depth())?;
    if (src.width, src.height) == (width, height) {
        out.samples = match src.samples {
            SamplesRef::U8(v) => Samples::U8(v.to_vec()),
            SamplesRef::U16(v) => Samples::U16(v.to_vec()),
        };
        return Ok(out);
    }
    let hx = axis_weights(src.width, width);
    let vy = axis_weights(src.height, height);
    let alpha = src.has_alpha();
    let mut dst = out.as_mut();
    // Horizontally resampled source rows the current output row needs (source rows only go forward).
    let mut window: VecDeque<(usize, Vec<f32>)> = VecDeque::new();
    let mut spare: Vec<Vec<f32>> = Vec::new();
    let mut line = Vec::with_capacity(src.width * c);
    let mut acc = vec![0f32; width * c];
    for (y, (y0, wy)) in vy.iter().enumerate() {
        if y % 16 == 0 {
            cancel.check()?;
        }
        while window.front().is_some_and(|(r, _)| r < y0) {
            spare.push(window.pop_front().unwrap().1);
        }
        let mut next = window.back().map_or(*y0, |(r, _)| r + 1);
        while next < y0 + wy.len() {
            row_premultiplied(&src, next, &mut line);
            let mut h = spare.pop().unwrap_or_default();
            h.clear();
            h.resize(width * c, 0.0);
            match c {
                1 => horizontal::<1>(&line, &hx, &mut h),
                2 => horizontal::<2>(&line, &hx, &mut h),
                3 => horizontal::<3>(&line, &hx, &mut h),
                _ => horizontal::<4>(&line, &hx, &mut h),
            }
            window.push_back((next, h));
            next += 1;
        }
        acc.iter_mut().for_each(|v| *v = 0.0);
        let first = window.front().map_or(0, |(r, _)| *r);
        for (k, w) in wy.iter().enumerate() {
            let h = &window[y0 + k - first].1;
            acc.iter_mut().zip(h).for_each(|(a, h)| *a += w * h);
        }
        for x in 0..width {
            let p = &acc[x * c..(x + 1) * c];
            if alpha {
                let a = p[c - 1].clamp(0.0, 1.0);
                dst.set(x, y, c - 1, a);
                #[allow(clippy::needless_range_loop)] // ch is also the destination channel
                for ch in 0..c - 1 {
                    dst.set(x, y, ch, if a > 1e-7 { p[ch] / a } else { 0.0 });
                }
            } else {
                #[allow(clippy::needless_range_loop)] // ch is also the destination channel
                for ch in 0..c {
                    dst.set(x, y, ch, p[ch]);
                }
            }
        }
    }
    Ok(out)
}
