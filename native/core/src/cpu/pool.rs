//! Max pooling on 3-D blobs (not global, not adaptive), spread over the pool one channel plane per
//! task: U²-Net's 2x2 stride-2 MaxPool with `ceil_mode` (ncnn pad mode 0, "full") after every
//! encoder stage. Same result as [`crate::reference`]'s pooling: the window is clipped to the input
//! once per output row / column (precomputed), and a window that reaches into the padding also
//! takes the padding's value (`f32::MIN`) as the reference does, so NaN inputs give the same answer.
//! 2x2 stride 2 has its own loop. Average pooling and the other forms go to the reference:
//! [`forward`] returns None.

use crate::ncnn::model::{PoolKind, Pooling};
use crate::tensor::Tensor;
use rayon::prelude::*;

/// Planes at least this big go one per task; smaller tensors run in one task.
const PAR_MIN: usize = 4096;

/// One axis: the padded extent's (before, after) pads, as the reference computes them for pad
/// modes 0 (full, with the tail that completes the last window), 1 (valid), 2 and 3 (same).
fn pads(n: usize, a: usize, b: usize, k: usize, s: usize, mode: i32) -> Option<(usize, usize)> {
    match mode {
        0 => {
            if n + a + b < k {
                return None;
            }
            let t = (n + a + b - k) % s;
            Some((a, b + if t != 0 { s - t } else { 0 }))
        }
        1 => Some((a, b)),
        2 | 3 => {
            let pad = (k + (n - 1) / s * s).saturating_sub(n);
            Some(if mode == 2 { (pad / 2, pad - pad / 2) } else { (pad - pad / 2, pad / 2) })
        }
        _ => None,
    }
}

/// Per output index along one axis: the window's input range [lo, hi) and whether it was clipped.
fn windows(n: usize, before: usize, k: usize, s: usize, out: usize) -> Vec<(usize, usize, bool)> {
    (0..out)
        .map(|o| {
            let b0 = o * s;
            let lo = b0.saturating_sub(before).min(n);
            let hi = (b0 + k).saturating_sub(before).min(n);
            (lo, hi, b0 < before || b0 + k > before + n)
        })
        .collect()
}

/// Max pooling of `x` (run inside the pool), or None for the reference (average, global, adaptive,
/// a bad geometry: its checks and messages).
pub fn forward(p: &Pooling, x: &Tensor) -> Option<Tensor> {
    if p.kind != PoolKind::Max || p.global || p.adaptive || x.dims != 3 || x.w == 0 || x.h == 0 || x.data.len() != x.c * x.h * x.w {
        return None;
    }
    let (kw, kh, sw, sh) = (p.kernel_w, p.kernel_h, p.stride_w, p.stride_h);
    if kw == 0 || kh == 0 || sw == 0 || sh == 0 {
        return None;
    }
    let (w, h) = (x.w, x.h);
    let (pt, pb) = pads(h, p.pad_top, p.pad_bottom, kh, sh, p.pad_mode)?;
    let (pl, pr) = pads(w, p.pad_left, p.pad_right, kw, sw, p.pad_mode)?;
    let (bh, bw) = (h + pt + pb, w + pl + pr);
    if bh < kh || bw < kw {
        return None;
    }
    let (oh, ow) = ((bh - kh) / sh + 1, (bw - kw) / sw + 1);
    let (wy, wx) = (windows(h, pt, kh, sh, oh), windows(w, pl, kw, sw, ow));
    let mut out = Tensor::zeros(x.c, oh, ow);
    let two = kw == 2 && kh == 2 && sw == 2 && sh == 2 && pl == 0 && pt == 0;
    let job = |(c, dst): (usize, &mut [f32])| {
        let src = &x.data[c * h * w..(c + 1) * h * w];
        for (orow, &(y0, y1, cy)) in dst.chunks_mut(ow).zip(&wy) {
            if two && y1 == y0 + 2 {
                let (r0, r1) = (&src[y0 * w..(y0 + 1) * w], &src[(y0 + 1) * w..(y0 + 2) * w]);
                let full = w / 2;
                for (ox, o) in orow[..full].iter_mut().enumerate() {
                    let i = 2 * ox;
                    *o = f32::NEG_INFINITY.max(r0[i]).max(r0[i + 1]).max(r1[i]).max(r1[i + 1]);
                }
                for (o, &(x0, x1, cx)) in orow[full..].iter_mut().zip(&wx[full..]) {
                    *o = window_max(src, w, y0, y1, x0, x1, cy || cx);
                }
                continue;
            }
            for (o, &(x0, x1, cx)) in orow.iter_mut().zip(&wx) {
                *o = window_max(src, w, y0, y1, x0, x1, cy || cx);
            }
        }
    };
    if out.data.len() >= PAR_MIN && x.c > 1 {
        out.data.par_chunks_mut(oh * ow).enumerate().for_each(job);
    } else {
        out.data.chunks_mut(oh * ow).enumerate().for_each(job);
    }
    Some(out)
}

/// Max over rows y0..y1, columns x0..x1 of a plane of width `w`; a clipped window also holds the
/// padding's `f32::MIN` (the reference's value for cells outside the input).
fn window_max(src: &[f32], w: usize, y0: usize, y1: usize, x0: usize, x1: usize, clipped: bool) -> f32 {
    let mut m = if clipped { f32::MIN } else { f32::NEG_INFINITY };
    for y in y0..y1 {
        for &v in &src[y * w + x0..y * w + x1] {
            m = m.max(v);
        }
    }
    m
}
