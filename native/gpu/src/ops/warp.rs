//! `rife.Warp` on the GPU: host side of the WGSL kernel in `warp.wgsl` (beside this file).
//! Semantics are the reference's ([`lucent_core::reference::warp`]): the sample point
//! (x + flow_x, y + flow_y) clamped into the image, then bilinear. One thread per output pixel,
//! dispatched like the element-wise kernels ([`super::EW`] threads per workgroup, workgroups
//! folded into x/y). With f16 storage the flow is read as f16 like every blob, which is what
//! rife-ncnn-vulkan does too (its default is fp16 storage): flows of 32..64 px then land on a
//! 1/32 px grid.

use super::{ew, params, pipeline, Io, Words, EW};
use crate::rec::Rec;
use crate::DevCtx;
use lucent_core::bail;
use lucent_core::error::{Code, Result};

const SHADER: &str = include_str!("warp.wgsl");

params! {
    /// The warp kernel's parameters.
    pub(crate) struct WarpParams {
        /// Pixels (threads): h * w.
        pub n: u32,
        pub c: u32,
        pub h: u32,
        pub w: u32,
    }
}

/// The kernel for f16 or f32 storage ([`WarpParams`]; IMG, FLOW inputs, Y output).
pub fn shader(f16: bool) -> String {
    let head = if f16 { "enable f16;\nalias T = f16;\n" } else { "alias T = f32;\n" };
    format!("{head}{}", SHADER.replace("WG", &EW.to_string()))
}

/// Record warping input 0 (an image) by input 1 (a 2-channel flow of the same size).
pub(crate) fn record(ctx: &mut DevCtx, rec: &mut Rec, io: &Io) -> Result<()> {
    let (img, flow) = (io.ins[0], io.ins[1]);
    if img.dims != 3 || flow.dims != 3 || flow.c != 2 || flow.h != img.h || flow.w != img.w || img.h == 0 || img.w == 0 {
        bail!(
            Code::InvalidArgument,
            "layer {}: Warp needs an image and a 2-channel flow of the same size, got {img:?} and {flow:?}",
            io.name
        );
    }
    let n = img.h * img.w;
    let p = WarpParams { n: n as u32, c: img.c as u32, h: img.h as u32, w: img.w as u32 };
    let (img_buf, flow_buf) = (rec.buf_of(io.bottoms[0]), rec.buf_of(io.bottoms[1]));
    let out = rec.alloc_blob(ctx, io.tops[0], img)?;
    let pipe = pipeline(ctx, rec, "warp", shader)?;
    ew(rec, pipe, vec![img_buf, flow_buf, out], &p.words(), n)
}

