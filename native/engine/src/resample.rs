//! Alpha plane resampling: the networks only see colour, so the alpha plane is upscaled on its own
//! with a separable bicubic (Catmull-Rom, a = -0.5) filter, pixel-centre aligned, edges clamped,
//! written straight into the destination's alpha channel one output row at a time (memory: one
//! input-width row of floats).

use crate::raster::{RasterMut, RasterRef};
use lucent_core::{Cancel, Code, Error, Result};

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
