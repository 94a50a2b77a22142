//! Interp (bilinear, resize type 2) on 3-D blobs, spread over the pool: U²-Net upsamples every
//! decoder stage and its six side outputs (up to 32x, to 320x320) this way. Same arithmetic as
//! [`crate::reference`]'s interp, in the same order (horizontal taps first, then vertical: `top =
//! a (1 - fx) + b fx`, `out = top (1 - fy) + bot fy`, tap coordinates computed as it does), so the
//! results are identical; the speed comes from computing each output row's horizontal pass once
//! per source row (not per output pixel), with the taps precomputed per column, and from splitting
//! the output into row bands over the pool. Nearest and bicubic go to the reference: [`forward`]
//! returns None.

use crate::error::{Code, Error, Result};
use crate::ncnn::model::Interp;
use crate::reference::{interp_out_size, interp_src};
use crate::tensor::Tensor;
use rayon::prelude::*;

/// Output rows per task at least (fewer for tiny outputs).
const BAND_MIN_PX: usize = 8192;

/// Source taps along one axis: (floor index clamped, next index clamped, fraction), from the
/// reference's `interp_src` with its edge clamping.
fn taps(in_len: usize, out_len: usize, align_corner: bool) -> Vec<(usize, usize, f32)> {
    let clampi = |i: isize| i.clamp(0, in_len as isize - 1) as usize;
    (0..out_len)
        .map(|dst| {
            let (s, frac) = interp_src(dst, in_len, out_len, align_corner);
            (clampi(s), clampi(s + 1), frac)
        })
        .collect()
}

/// Bilinear Interp of `x` (run inside the pool), or None for what the reference should do
/// (another resize type, not a 3-D blob, an empty size: its checks and messages).
pub fn forward(p: &Interp, x: &Tensor) -> Option<Result<Tensor>> {
    if p.resize_type != 2 || x.dims != 3 || x.data.len() != x.c * x.h * x.w || x.w == 0 || x.h == 0 {
        return None;
    }
    let (ow, oh) = interp_out_size(p, x.w, x.h);
    if ow == 0 || oh == 0 {
        return None;
    }
    let Some(len) = x.c.checked_mul(oh).and_then(|v| v.checked_mul(ow)) else {
        return Some(Err(Error::new(Code::InvalidArgument, format!("Interp output {}x{oh}x{ow} is too large", x.c))));
    };
    let (tx, ty) = (taps(x.w, ow, p.align_corner), taps(x.h, oh, p.align_corner));
    let mut out = Tensor { dims: 3, c: x.c, h: oh, w: ow, data: vec![0.0; len] };
    // Bands of whole rows within one channel plane, about 4 tasks per thread.
    let threads = rayon::current_num_threads().max(1);
    let want_tasks = (threads * 4).div_ceil(x.c);
    let band = oh.div_ceil(want_tasks).max(BAND_MIN_PX.div_ceil(ow)).min(oh);
    let bands_per_plane = oh.div_ceil(band);
    let plane = oh * ow;
    if x.c * bands_per_plane > 1 && len >= BAND_MIN_PX {
        // One task per (channel, band of rows).
        out.data.par_chunks_mut(plane).enumerate().for_each(|(c, dp)| {
            dp.par_chunks_mut(band * ow).enumerate().for_each(|(b, d)| band_job(x, c, b * band, d, &tx, &ty));
        });
    } else {
        out.data.chunks_mut(plane).enumerate().for_each(|(c, dp)| band_job(x, c, 0, dp, &tx, &ty));
    }
    Some(Ok(out))
}

/// Output rows `y0..` (as many as `dst` holds) of channel `c`: each row's two source rows are
/// resampled horizontally once and kept while the next output rows read the same ones.
fn band_job(x: &Tensor, c: usize, y0: usize, dst: &mut [f32], tx: &[(usize, usize, f32)], ty: &[(usize, usize, f32)]) {
    let (iw, ih, ow) = (x.w, x.h, tx.len());
    let src = &x.data[c * ih * iw..(c + 1) * ih * iw];
    let hrow = |sy: usize, row: &mut [f32]| {
        let s = &src[sy * iw..(sy + 1) * iw];
        for (o, &(x0, x1, fx)) in row.iter_mut().zip(tx) {
            *o = s[x0] * (1.0 - fx) + s[x1] * fx;
        }
    };
    let (mut top, mut bot) = (vec![0f32; ow], vec![0f32; ow]);
    let mut have: Option<(usize, usize)> = None;
    for (r, orow) in dst.chunks_mut(ow).enumerate() {
        let (s0, s1, fy) = ty[y0 + r];
        if have != Some((s0, s1)) {
            match have {
                Some((_, h1)) if h1 == s0 => {
                    std::mem::swap(&mut top, &mut bot);
                    hrow(s1, &mut bot);
                }
                _ => {
                    hrow(s0, &mut top);
                    hrow(s1, &mut bot);
                }
            }
            have = Some((s0, s1));
        }
        for ((o, &t), &b) in orow.iter_mut().zip(&top).zip(&bot) {
            *o = t * (1.0 - fy) + b * fy;
        }
    }
}
