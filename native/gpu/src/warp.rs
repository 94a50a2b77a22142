//! `rife.Warp` on the GPU: host side of the WGSL kernel in `warp.wgsl` (beside this file).
//! Semantics are the reference's ([`lucent_core::reference::warp`]): the sample point
//! (x + flow_x, y + flow_y) clamped into the image, then bilinear. One thread per output pixel,
//! dispatched like the element-wise kernels ([`crate::kernels::EW`] threads per workgroup,
//! workgroups folded into x/y). With f16 storage the flow is read as f16 like every blob, which is
//! what rife-ncnn-vulkan does too (its default is fp16 storage): flows of 32..64 px then land on
//! a 1/32 px grid.

use crate::exec::Shape;
use crate::kernels::EW;
use lucent_core::bail;
use lucent_core::error::{Code, Result};

const SHADER: &str = include_str!("warp.wgsl");

/// The kernel for f16 or f32 storage.
pub(crate) fn shader(f16: bool) -> String {
    let head = if f16 { "enable f16;\nalias T = f16;\n" } else { "alias T = f32;\n" };
    format!("{head}{}", SHADER.replace("WG", &EW.to_string()))
}

/// Output shape, parameters and thread count for warping `img` by `flow`.
pub(crate) fn plan(img: Shape, flow: Shape, lname: &str) -> Result<(Shape, Vec<u32>, usize)> {
    if img.dims != 3 || flow.dims != 3 || flow.c != 2 || flow.h != img.h || flow.w != img.w || img.h == 0 || img.w == 0 {
        bail!(Code::InvalidArgument, "layer {lname}: Warp needs an image and a 2-channel flow of the same size, got {img:?} and {flow:?}");
    }
    let n = img.h * img.w;
    Ok((img, vec![n as u32, img.c as u32, img.h as u32, img.w as u32], n))
}
