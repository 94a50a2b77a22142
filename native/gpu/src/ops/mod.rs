//! The kernels, one op family per file: each holds its WGSL builder, the typed parameters its
//! kernel reads and its part of recording a step.
//!
//! - Convolutions: `crate::conv_step` records a convolution step (weights in its kernel's layout,
//!   the fused epilogue, a residual) and hands the dispatch to the layer's kernel:
//!   [`conv_gemm`] (FMA implicit GEMM), [`mma`] (cooperative matrices or their emulation),
//!   [`rb`] (register-blocked direct convolution, CPU adapters) or [`direct`] (one output per
//!   thread; also deconvolution and inner product). [`conv`] holds what they share (bindings,
//!   epilogue, parameters, dispatch).
//! - [`eltwise`]: unary activations / affine, BinaryOp and Eltwise with broadcasting.
//! - [`resample`]: PixelShuffle, Interp and their fused sum.
//! - [`copy`]: strided box copies (Concat, Crop, Permute).
//! - [`pool`], [`softmax`], [`warp`] (rife.Warp).
//! - [`attention`]: the transformer ops (LayerNorm, PadToMultiple, window and channel attention;
//!   GELU is a unary case); [`overlap`]: HAT's overlapping cross-attention.
//!
//! Which convolution kernel a layer gets is decided in `choice.rs`, not here.
//!
//! Every kernel reads its parameters from binding 0, an `array<u32>` slice `P` of the run's
//! parameter buffer. On the host each kernel's parameters are a struct declared with
//! [`params!`]: its fields, in order, are the words `P[0]`, `P[1]`, ... (f32 fields bit-cast,
//! i32 and bool as u32, nested parameter structs and arrays flattened), so the struct is the
//! layout; kernels with tables (the GEMMs' gather table, Interp's taps) append them after it.

pub mod attention;
pub(crate) mod conv;
pub mod conv_gemm;
pub mod copy;
pub mod direct;
pub mod eltwise;
pub mod mma;
pub mod overlap;
pub mod pool;
pub mod rb;
pub mod resample;
pub mod softmax;
pub mod warp;

use crate::rec::{fold, Rec};
use crate::shape::Shape;
use crate::DevCtx;
use lucent_core::error::Result;
use lucent_core::ncnn::Activation;

/// Kernel parameters as the words of the parameter buffer.
pub trait Words {
    fn push_words(&self, out: &mut Vec<u32>);
    fn words(&self) -> Vec<u32> {
        let mut v = Vec::new();
        self.push_words(&mut v);
        v
    }
}

impl Words for u32 {
    fn push_words(&self, out: &mut Vec<u32>) {
        out.push(*self);
    }
}

impl Words for i32 {
    fn push_words(&self, out: &mut Vec<u32>) {
        out.push(*self as u32);
    }
}

impl Words for f32 {
    fn push_words(&self, out: &mut Vec<u32>) {
        out.push(self.to_bits());
    }
}

impl Words for bool {
    fn push_words(&self, out: &mut Vec<u32>) {
        out.push(*self as u32);
    }
}

impl<T: Words, const N: usize> Words for [T; N] {
    fn push_words(&self, out: &mut Vec<u32>) {
        for x in self {
            x.push_words(out);
        }
    }
}

/// A kernel's parameter struct: the fields, in order, are its words `P[0]`, `P[1]`, ...
macro_rules! params {
    ($(#[$m:meta])* $vis:vis struct $name:ident { $($(#[$fm:meta])* $fvis:vis $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq)]
        $vis struct $name {
            $($(#[$fm])* $fvis $field: $ty),*
        }
        impl $crate::ops::Words for $name {
            fn push_words(&self, out: &mut Vec<u32>) {
                $($crate::ops::Words::push_words(&self.$field, out);)*
            }
        }
    };
}
pub(crate) use params;

/// Workgroup size of the one-element-per-thread kernels.
pub const EW: u32 = 64;

pub(crate) fn header(f16: bool) -> String {
    header_with(f16, f16)
}

/// Common header: storage type `T` (f16 or f32), `enable f16;` when `enable_f16` (f16 storage,
/// or f16 values elsewhere in the kernel), the parameter buffer and the activation function.
pub(crate) fn header_with(f16: bool, enable_f16: bool) -> String {
    let mut s = String::new();
    if enable_f16 {
        s.push_str("enable f16;\n");
    }
    if f16 {
        s.push_str("alias T = f16;\n");
    } else {
        s.push_str("alias T = f32;\n");
    }
    s.push_str(
        r#"
@group(0) @binding(0) var<storage, read> P: array<u32>;
fn pf(i: u32) -> f32 { return bitcast<f32>(P[i]); }
fn act(v: f32, t: u32, a: f32, b: f32) -> f32 {
    switch t {
        case 1u: { return max(v, 0.0); }
        case 2u: { return select(v, v * a, v < 0.0); }
        case 3u: { return min(max(v, a), b); }
        case 4u: { return 1.0 / (1.0 + exp(-v)); }
        case 5u: { let sp = select(log(1.0 + exp(v)), v, v > 20.0); return v * tanh(min(sp, 20.0)); }
        case 6u: {
            let lo = -b / a;
            let hi = 1.0 / a + lo;
            if (v < lo) { return 0.0; }
            if (v > hi) { return v; }
            return v * (v * a + b);
        }
        default: { return v; }
    }
}
"#,
    );
    s
}

/// An activation as the `act` function of the header takes it: (code, a, b).
pub(crate) fn act_code(a: Activation) -> (u32, f32, f32) {
    match a {
        Activation::None => (0, 0.0, 0.0),
        Activation::Relu => (1, 0.0, 0.0),
        Activation::LeakyRelu(s) => (2, s, 0.0),
        Activation::Clip(lo, hi) => (3, lo, hi),
        Activation::Sigmoid => (4, 0.0, 0.0),
        Activation::Mish => (5, 0.0, 0.0),
        Activation::HardSwish(a, b) => (6, a, b),
    }
}

const EW_MAIN: &str = r#"
@compute @workgroup_size(EWu)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * EWu;
    if (i >= P[0]) { return; }
"#;

/// The entry point of the one-element-per-thread kernels: thread `i`, returning at `P[0]`.
pub(crate) fn ew_main() -> String {
    EW_MAIN.replace("EW", &EW.to_string())
}

/// A one-element-per-thread kernel's bindings after the parameters: `X` input, `Y` output.
pub(crate) const X_TO_Y: &str = r#"
@group(0) @binding(1) var<storage, read> X: array<T>;
@group(0) @binding(2) var<storage, read_write> Y: array<T>;
"#;

/// What an op's recording sees of its step: the name (for errors), its input and output blobs
/// and the input shapes.
pub(crate) struct Io<'a> {
    pub name: &'a str,
    pub bottoms: &'a [usize],
    pub tops: &'a [usize],
    pub ins: &'a [Shape],
}

/// The compiled kernel `key` for the run's storage precision (cached per device).
pub(crate) fn pipeline(ctx: &mut DevCtx, rec: &Rec, key: &str, src: impl FnOnce(bool) -> String) -> Result<wgpu::ComputePipeline> {
    let f16 = rec.f16;
    ctx.pipeline(&format!("{key}:{}", if f16 { "f16" } else { "f32" }), || src(f16))
}

/// Record a one-element-per-thread kernel over `n` elements ([`EW`] threads per workgroup,
/// workgroups folded into x/y).
pub(crate) fn ew(rec: &mut Rec, pipe: wgpu::ComputePipeline, bufs: Vec<wgpu::Buffer>, p: &[u32], n: usize) -> Result<()> {
    let (x, y) = fold(n.div_ceil(EW as usize), rec.maxdim)?;
    rec.cmd(pipe, bufs, p, (x, y, 1));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Words;

    /// The WGSL reads fixed word positions: the structs must keep them.
    #[test]
    fn parameter_structs_have_the_kernels_layout() {
        use super::conv::{ConvParams, Epilogue};
        let epi = Epilogue { act: 1, act_a: 2.0, act_b: 3.0, flags: 4, c_conv: 5.0, c_res: 6.0 };
        let conv = ConvParams { lead: 7, out_c: 9, pad_value: -1.5, epi, mg: 11, ..Default::default() };
        let w = conv.words();
        // `epi` reads P[3] out_c, P[15] act, 16/17 its parameters, P[18] flags, 19/20 the residual's
        // coefficients; the GEMMs P[21] outputs per group.
        assert_eq!(w.len(), 22);
        assert_eq!((w[0], w[3], w[14], w[15], w[18], w[21]), (7, 9, (-1.5f32).to_bits(), 1, 4, 11));
        assert_eq!((w[16], w[17], w[19], w[20]), (2f32.to_bits(), 3f32.to_bits(), 5f32.to_bits(), 6f32.to_bits()));
        // The gather table starts at P[25]; rb's row is P[22]; direct kernels' in/group P[22].
        assert_eq!(super::conv_gemm::GemmParams::default().words().len(), 25);
        assert_eq!(super::rb::RbParams::default().words().len(), 23);
        assert_eq!(super::direct::DirectParams::default().words().len(), 23);
        let inner = super::direct::InnerParams { n: 1, inputs: 2, out_c: 3, epi, ..Default::default() }.words();
        assert_eq!(inner.len(), 21);
        assert_eq!((inner[0], inner[1], inner[3], inner[15], inner[18]), (1, 2, 3, 1, 4));
        // Interp's tap table starts at P[8].
        assert_eq!(super::resample::ResampleParams::default().words().len(), 8);
        assert_eq!(super::resample::PshufParams::default().words().len(), 6);
        assert_eq!(super::eltwise::UnaryParams::default().words().len(), 6);
        let b = super::eltwise::BinaryParams { a_strides: [4, 5, 6], b_strides: [7, 8, 9], op: 10, b_scalar: true, ..Default::default() };
        assert_eq!(b.words()[4..14], [4, 5, 6, 7, 8, 9, 10, 0, 0, 1]);
        assert_eq!(b.words().len(), 15);
        assert_eq!(super::copy::CopyParams::default().words().len(), 12);
        let pool = super::pool::PoolParams { hi_y: -2, lo_x: -3, avg: true, ..Default::default() }.words();
        assert_eq!((pool.len(), pool[12], pool[14], pool[18]), (19, 1, -2i32 as u32, -3i32 as u32));
        assert_eq!(super::softmax::SoftmaxParams::default().words().len(), 3);
        assert_eq!(super::warp::WarpParams::default().words().len(), 4);
        // The attention kernels read P[2] eps, P[10..14] scale / mask / bias, P[4] heads.
        use super::attention::{ChannelParams, LayerNormParams, PadParams, WindowParams};
        assert_eq!(LayerNormParams { eps: 0.5, ..Default::default() }.words(), [0, 0, 0.5f32.to_bits()]);
        assert_eq!(PadParams::default().words().len(), 5);
        let wp = WindowParams { scale: 2.0, masked: true, mask_value: -100.0, has_bias: true, ..Default::default() }.words();
        assert_eq!((wp.len(), wp[10], wp[11], wp[12], wp[13]), (14, 2f32.to_bits(), 1, (-100f32).to_bits(), 1));
        assert_eq!(ChannelParams { heads: 3, ..Default::default() }.words()[4], 3);
        let op = super::overlap::OverlapParams { scale: 0.5, has_bias: true, ..Default::default() }.words();
        assert_eq!((op.len(), op[6], op[7]), (8, 0.5f32.to_bits(), 1));
    }
}
