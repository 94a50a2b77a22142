//! `rife.Warp` on the CPU backend: the reference's bilinear backward warp (same taps, same
//! arithmetic order, so the results are bit-identical to [`crate::reference::warp`]), spread over
//! the backend's thread pool one output row at a time: the row's taps are computed once and
//! applied to every channel. Memory-bound: each output value reads 4 image values.

use crate::error::Result;
use crate::reference::{check_warp_args, warp_taps};
use crate::tensor::Tensor;
use rayon::prelude::*;

/// Warp `image` (C x H x W) by `flow` (2 x H x W); runs on the current rayon pool.
pub fn forward(image: &Tensor, flow: &Tensor) -> Result<Tensor> {
    check_warp_args(image, flow)?;
    let (c, h, w) = (image.c, image.h, image.w);
    let plane = h * w;
    let mut out = Tensor::zeros(c, h, w);
    let (fx, fy) = (flow.channel(0), flow.channel(1));
    // Rows of every channel plane, grouped by row index: rows[y] = [plane 0 row y, plane 1 row y, ...].
    let mut rows: Vec<Vec<&mut [f32]>> = (0..h).map(|_| Vec::with_capacity(c)).collect();
    for p in out.data.chunks_mut(plane) {
        for (y, r) in p.chunks_mut(w).enumerate() {
            rows[y].push(r);
        }
    }
    rows.into_par_iter().enumerate().for_each(|(y, mut dst)| {
        let (fxr, fyr) = (&fx[y * w..(y + 1) * w], &fy[y * w..(y + 1) * w]);
        let taps: Vec<(usize, usize, f32, usize, usize, f32)> = (0..w)
            .map(|x| {
                let (x0, x1, a) = warp_taps(x, fxr[x], w);
                let (y0, y1, b) = warp_taps(y, fyr[x], h);
                (x0, x1, a, y0 * w, y1 * w, b)
            })
            .collect();
        for (ch, d) in dst.iter_mut().enumerate() {
            let src = &image.data[ch * plane..(ch + 1) * plane];
            for (o, &(x0, x1, a, r0, r1, b)) in d.iter_mut().zip(&taps) {
                let top = src[r0 + x0] * (1.0 - a) + src[r0 + x1] * a;
                let bot = src[r1 + x0] * (1.0 - a) + src[r1 + x1] * a;
                *o = top * (1.0 - b) + bot * b;
            }
        }
    });
    Ok(out)
}
