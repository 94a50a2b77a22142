//! `rife.Warp` on the CPU backend: the reference's bilinear backward warp (same taps, same
//! arithmetic order, so the results are bit-identical to [`crate::reference::warp`]), spread over
//! the backend's thread pool one output row of one channel at a time. Memory-bound: each output
//! value reads 4 image values and 2 flow values.

use crate::error::Result;
use crate::reference::{check_warp_args, warp_taps};
use crate::tensor::Tensor;
use rayon::prelude::*;

/// Warp `image` (C x H x W) by `flow` (2 x H x W); runs on the current rayon pool.
pub fn forward(image: &Tensor, flow: &Tensor) -> Result<Tensor> {
    check_warp_args(image, flow)?;
    let (h, w) = (image.h, image.w);
    let plane = h * w;
    let mut out = Tensor::zeros(image.c, h, w);
    let (fx, fy) = (flow.channel(0), flow.channel(1));
    out.data.par_chunks_mut(w).enumerate().for_each(|(row, dst)| {
        let (c, y) = (row / h, row % h);
        let src = &image.data[c * plane..(c + 1) * plane];
        let (fxr, fyr) = (&fx[y * w..(y + 1) * w], &fy[y * w..(y + 1) * w]);
        for (x, d) in dst.iter_mut().enumerate() {
            let (x0, x1, a) = warp_taps(x, fxr[x], w);
            let (y0, y1, b) = warp_taps(y, fyr[x], h);
            let (r0, r1) = (&src[y0 * w..(y0 + 1) * w], &src[y1 * w..(y1 + 1) * w]);
            let top = r0[x0] * (1.0 - a) + r0[x1] * a;
            let bot = r1[x0] * (1.0 - a) + r1[x1] * a;
            *d = top * (1.0 - b) + bot * b;
        }
    });
    Ok(out)
}
