//! What every convolution kernel shares: the bindings and fused epilogue of their WGSL, their
//! parameters ([`ConvParams`]), the output shape, and the dispatch over output tiles x groups.
//! The kernels: `conv_gemm.rs`, `mma.rs`, `rb.rs`, `direct.rs`; a convolution step's recording
//! (weights, epilogue, which kernel): `crate::conv_step` (src/conv_step.rs).

use super::params;
use crate::rec::{fold, Rec};
use crate::shape::Shape;
use lucent_core::bail;
use lucent_core::error::{Code, Result};
use lucent_core::ncnn::{Activation, Conv};

params! {
    /// The fused epilogue's parameters: y = act(acc + bias), then the PReLU slope where
    /// negative, then y * c_conv + r * c_res with the residual r.
    pub(crate) struct Epilogue {
        /// Activation code ([`super::act_code`]).
        pub act: u32,
        /// Its parameters.
        pub act_a: f32,
        pub act_b: f32,
        /// [`EPI_PRELU`] | [`EPI_PRELU_PER_CHANNEL`] | [`EPI_RESIDUAL`].
        pub flags: u32,
        pub c_conv: f32,
        pub c_res: f32,
    }
}

params! {
    /// The parameters every convolution kernel starts with (deconvolution and inner product
    /// too, see `direct.rs`); each kernel appends its own.
    pub(crate) struct ConvParams {
        /// The GEMMs and the register-blocked kernel: input channels per group. The
        /// one-output-per-thread kernels: the number of outputs (threads).
        pub lead: u32,
        pub in_h: u32,
        pub in_w: u32,
        /// Output channels (also where AUX's PReLU slopes start, after the biases).
        pub out_c: u32,
        pub out_h: u32,
        pub out_w: u32,
        pub kh: u32,
        pub kw: u32,
        pub sh: u32,
        pub sw: u32,
        pub dh: u32,
        pub dw: u32,
        /// Top and left padding (deconvolution: the top and left cut of the full output).
        pub pad_top: u32,
        pub pad_left: u32,
        pub pad_value: f32,
        pub epi: Epilogue,
        /// Outputs per group.
        pub mg: u32,
    }
}

/// A convolution-like layer's uploaded weights (in its kernel's layout), its AUX buffer (f32
/// biases, then the PReLU slopes) and what its epilogue applies.
pub(crate) struct ConvW {
    pub w: wgpu::Buffer,
    pub aux: wgpu::Buffer,
    pub act: Activation,
    /// PReLU slopes (1 or one per output channel).
    pub prelu: Option<usize>,
}

/// Epilogue flags.
pub(crate) const EPI_PRELU: u32 = 2;
pub(crate) const EPI_PRELU_PER_CHANNEL: u32 = 4;
pub(crate) const EPI_RESIDUAL: u32 = 8;

/// Shared bindings and epilogue of the convolution-like kernels: X input, W weights, AUX f32
/// [bias(out_c) | slopes], R residual, Y output; `epi` applies [`Epilogue`].
const CONV_COMMON: &str = r#"
@group(0) @binding(1) var<storage, read> X: array<T>;
@group(0) @binding(2) var<storage, read> W: array<T>;
@group(0) @binding(3) var<storage, read> AUX: array<f32>;
@group(0) @binding(4) var<storage, read> R: array<T>;
@group(0) @binding(5) var<storage, read_write> Y: array<T>;
fn epi(acc: f32, oc: u32, o: u32) -> f32 {
    let flags = P[18];
    var v = act(acc + AUX[oc], P[15], pf(16u), pf(17u));
    if ((flags & 2u) != 0u) {
        let s = select(AUX[P[3]], AUX[P[3] + oc], (flags & 4u) != 0u);
        v = select(v, v * s, v < 0.0);
    }
    if ((flags & 8u) != 0u) {
        v = v * pf(19u) + f32(R[o]) * pf(20u);
    }
    return v;
}
"#;

/// The bindings and epilogue shared by the convolution kernels.
pub(crate) fn conv_common() -> String {
    CONV_COMMON.to_string()
}

/// Output shape of a convolution and its resolved (left, right, top, bottom) padding.
pub(crate) fn conv_shape(c: &Conv, s: Shape, lname: &str) -> Result<(Shape, (usize, usize, usize, usize))> {
    if s.dims != 3 || s.c != c.num_input {
        bail!(Code::ModelInvalid, "layer {lname}: convolution wants {} channels, got shape {:?}", c.num_input, s);
    }
    let kew = c.dilation_w * (c.kernel_w - 1) + 1;
    let keh = c.dilation_h * (c.kernel_h - 1) + 1;
    let pads = c.pad.resolve(s.w, s.h, kew, keh, c.stride_w, c.stride_h);
    let wp = s.w + pads.0 + pads.1;
    let hp = s.h + pads.2 + pads.3;
    if wp < kew || hp < keh {
        bail!(Code::ModelInvalid, "layer {lname}: input {}x{} smaller than the kernel", s.w, s.h);
    }
    Ok((Shape::d3(c.num_output, (hp - keh) / c.stride_h + 1, (wp - kew) / c.stride_w + 1), pads))
}

/// One convolution step's dispatch, as its kernel records it.
pub(crate) struct ConvCall<'a> {
    pub c: &'a Conv,
    pub params: ConvParams,
    /// Input and output shapes.
    pub input: Shape,
    pub output: Shape,
    /// X, W, AUX, R, Y (bindings 1..5).
    pub bufs: Vec<wgpu::Buffer>,
    pub lname: &'a str,
}

/// Record a tiled convolution kernel: `tiles` workgroups per group (folded into x/y), the
/// groups along z.
pub(crate) fn dispatch_tiles(
    rec: &mut Rec,
    pipe: wgpu::ComputePipeline,
    bufs: Vec<wgpu::Buffer>,
    p: &[u32],
    tiles: usize,
    groups: usize,
    lname: &str,
) -> Result<()> {
    let (gx, gy) = fold(tiles, rec.maxdim)?;
    if groups as u32 > rec.maxdim {
        bail!(Code::ModelInvalid, "layer {lname}: too many groups");
    }
    rec.cmd(pipe, bufs, p, (gx, gy, groups as u32));
    Ok(())
}
