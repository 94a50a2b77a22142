//! Element-wise kernels: `unary` (ReLU / leaky ReLU, PReLU, sigmoid, tanh, clip, per-channel
//! affine for BatchNorm / Scale, exact GELU) and `binary` (BinaryOp and Eltwise with 3-D broadcasting
//! through strides, a scalar operand, coefficients), one element per thread.

use super::{ew, ew_main, header, params, pipeline, Io, Words};
use crate::rec::Rec;
use crate::shape::{broadcast, Shape};
use crate::DevCtx;
use lucent_core::bail;
use lucent_core::error::{Code, Result};
use lucent_core::ncnn::{BinaryOpKind, EltwiseKind, Op};

params! {
    /// The unary kernel's parameters.
    pub(crate) struct UnaryParams {
        pub n: u32,
        /// Elements per channel.
        pub plane: u32,
        /// 0 (leaky) ReLU, 1 PReLU, 2 sigmoid, 3 tanh, 4 clip, 5 per-channel affine, 6 GELU (erf form).
        pub op: u32,
        /// Leaky slope, or clip's bounds.
        pub a: f32,
        pub b: f32,
        /// PReLU: slopes in AUX; affine: channels (AUX is scales, then biases).
        pub aux_len: u32,
    }
}

params! {
    /// The binary kernel's parameters: Y = op(A, B) over the output box (c, h, w), the operands
    /// read through their (c, h, w) element strides (0 where broadcast).
    pub(crate) struct BinaryParams {
        pub n: u32,
        pub c: u32,
        pub h: u32,
        pub w: u32,
        pub a_strides: [u32; 3],
        pub b_strides: [u32; 3],
        /// 0 add (a * ca + b * cb), 1 sub, 2 mul, 3 div, 4 max, 5 min, 6 pow, 7 b - a, 8 b / a.
        pub op: u32,
        pub ca: f32,
        pub cb: f32,
        /// B is the scalar below (else the binding).
        pub b_scalar: bool,
        pub scalar: f32,
    }
}

impl BinaryParams {
    /// `op` over output `os` with operand strides `sa` and `sb` (see `broadcast`).
    pub(crate) fn new(os: Shape, sa: [usize; 3], sb: [usize; 3], op: u32, ca: f32, cb: f32, scalar: Option<f32>) -> BinaryParams {
        let u = |s: [usize; 3]| s.map(|x| x as u32);
        BinaryParams {
            n: os.len() as u32,
            c: os.c as u32,
            h: os.h as u32,
            w: os.w as u32,
            a_strides: u(sa),
            b_strides: u(sb),
            op,
            ca,
            cb,
            b_scalar: scalar.is_some(),
            scalar: scalar.unwrap_or(0.0),
        }
    }
}

/// [`UnaryParams`]: X input, AUX f32 (PReLU slopes, or affine scales then biases), Y output.
pub fn unary(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(
        r#"
@group(0) @binding(1) var<storage, read> X: array<T>;
@group(0) @binding(2) var<storage, read> AUX: array<f32>;
@group(0) @binding(3) var<storage, read_write> Y: array<T>;

// erf, Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7 in exact arithmetic), as the reference's.
fn erf_as(x: f32) -> f32 {
    let a = abs(x);
    let t = 1.0 / (1.0 + 0.3275911 * a);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    let y = 1.0 - poly * exp(-a * a);
    return select(-y, y, x >= 0.0);
}
"#,
    );
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let v = f32(X[i]);
    let ch = i / P[1];
    let a = pf(3u);
    let b = pf(4u);
    var r = v;
    switch P[2] {
        case 0u: { r = select(v, v * a, v < 0.0); }
        case 1u: { let sl = select(AUX[0], AUX[ch], P[5] > 1u); r = select(v, v * sl, v < 0.0); }
        case 2u: { r = 1.0 / (1.0 + exp(-v)); }
        case 3u: { r = tanh(clamp(v, -20.0, 20.0)); }
        case 4u: { r = min(max(v, a), b); }
        case 5u: { r = v * AUX[ch] + AUX[P[5] + ch]; }
        case 6u: { r = 0.5 * v * (1.0 + erf_as(v * 0.70710678)); }
        default: { }
    }
    Y[i] = T(r);
}
"#,
    );
    s
}

/// [`BinaryParams`]: A, B inputs, Y output.
pub fn binary(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(
        r#"
@group(0) @binding(1) var<storage, read> A: array<T>;
@group(0) @binding(2) var<storage, read> B: array<T>;
@group(0) @binding(3) var<storage, read_write> Y: array<T>;
"#,
    );
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let hw = P[2] * P[3];
    let c = i / hw;
    let r = i - c * hw;
    let y = r / P[3];
    let x = r - y * P[3];
    let a = f32(A[c * P[4] + y * P[5] + x * P[6]]);
    var b = pf(14u);
    if (P[13] == 0u) { b = f32(B[c * P[7] + y * P[8] + x * P[9]]); }
    var o = 0.0;
    switch P[10] {
        case 0u: { o = a * pf(11u) + b * pf(12u); }
        case 1u: { o = a - b; }
        case 2u: { o = a * b; }
        case 3u: { o = a / b; }
        case 4u: { o = max(a, b); }
        case 5u: { o = min(a, b); }
        case 6u: { o = pow(a, b); }
        case 7u: { o = b - a; }
        case 8u: { o = b / a; }
        default: { }
    }
    Y[i] = T(o);
}
"#,
    );
    s
}

/// Record a unary layer (ReLU, PReLU, Sigmoid, TanH, Clip, ChannelAffine, Gelu); `aux`: its slopes or
/// scales and biases (a dummy where it has none).
pub(crate) fn record_unary(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, op: &Op, aux: wgpu::Buffer) -> Result<()> {
    let s = io.ins[0];
    let (code, a, b, n) = match op {
        Op::ReLU { slope } => (0, *slope, 0.0, 0),
        Op::PReLU { slope } => (1, 0.0, 0.0, slope.len()),
        Op::Sigmoid => (2, 0.0, 0.0, 0),
        Op::TanH => (3, 0.0, 0.0, 0),
        Op::Clip { min, max } => (4, *min, *max, 0),
        Op::ChannelAffine { scale, .. } => (5, 0.0, 0.0, scale.len()),
        Op::Gelu => (6, 0.0, 0.0, 0),
        _ => unreachable!(),
    };
    let x = rec.buf_of(io.bottoms[0]);
    let out = rec.alloc_blob(ctx, io.tops[0], s)?;
    let p = UnaryParams { n: s.len() as u32, plane: s.plane().max(1) as u32, op: code, a, b, aux_len: n as u32 };
    let pipe = pipeline(ctx, rec, "unary", unary)?;
    ew(rec, pipe, vec![x, aux, out], &p.words(), s.len())
}

/// The compiled binary kernel.
fn binary_pipeline(ctx: &mut DevCtx, rec: &Rec) -> Result<wgpu::ComputePipeline> {
    pipeline(ctx, rec, "binary", binary)
}

/// Record the binary kernel on buffers [A, B, Y].
pub(crate) fn record_binary(ctx: &mut DevCtx, rec: &mut Rec, bufs: [wgpu::Buffer; 3], p: BinaryParams) -> Result<()> {
    let pipe = binary_pipeline(ctx, rec)?;
    ew(rec, pipe, bufs.to_vec(), &p.words(), p.n as usize)
}

/// Record a BinaryOp layer: two inputs broadcast against each other, or one and a scalar.
pub(crate) fn record_binary_op(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, op: BinaryOpKind, scalar: Option<f32>) -> Result<()> {
    let code = match op {
        BinaryOpKind::Add => 0,
        BinaryOpKind::Sub => 1,
        BinaryOpKind::Mul => 2,
        BinaryOpKind::Div => 3,
        BinaryOpKind::Max => 4,
        BinaryOpKind::Min => 5,
        BinaryOpKind::Pow => 6,
        BinaryOpKind::RSub => 7,
        BinaryOpKind::RDiv => 8,
    };
    let pipe = binary_pipeline(ctx, rec)?;
    let a = rec.buf_of(io.bottoms[0]);
    if let (Some(v), 1) = (scalar, io.bottoms.len()) {
        let s = io.ins[0];
        let out = rec.alloc_blob(ctx, io.tops[0], s)?;
        let full = [s.h * s.w, s.w, 1];
        let p = BinaryParams::new(s, full, [0, 0, 0], code, 1.0, 1.0, Some(v));
        ew(rec, pipe, vec![a.clone(), a, out], &p.words(), s.len())
    } else {
        if io.bottoms.len() != 2 {
            bail!(Code::ModelInvalid, "layer {}: BinaryOp needs two inputs", io.name);
        }
        let (os, sa, sb) = broadcast(io.ins[0], io.ins[1], io.name)?;
        let b = rec.buf_of(io.bottoms[1]);
        let out = rec.alloc_blob(ctx, io.tops[0], os)?;
        let p = BinaryParams::new(os, sa, sb, code, 1.0, 1.0, None);
        ew(rec, pipe, vec![a, b, out], &p.words(), os.len())
    }
}

/// Record an Eltwise layer: its inputs folded left to right, one binary dispatch per input
/// after the first (sums with their coefficients).
pub(crate) fn record_eltwise(ctx: &mut DevCtx, rec: &mut Rec, io: &Io, op: EltwiseKind, coeffs: &[f32]) -> Result<()> {
    if io.bottoms.len() < 2 {
        bail!(Code::ModelInvalid, "layer {}: Eltwise needs two or more inputs", io.name);
    }
    let code = match op {
        EltwiseKind::Sum => 0,
        EltwiseKind::Prod => 2,
        EltwiseKind::Max => 4,
    };
    let coef = |i: usize| if op == EltwiseKind::Sum { coeffs.get(i).copied().unwrap_or(1.0) } else { 1.0 };
    let pipe = binary_pipeline(ctx, rec)?;
    let n = io.bottoms.len();
    let mut acc = rec.buf_of(io.bottoms[0]);
    let mut acc_shape = io.ins[0];
    for i in 1..n {
        let (os, sa, sb) = broadcast(acc_shape, io.ins[i], io.name)?;
        let dst = if i == n - 1 { rec.alloc_blob(ctx, io.tops[0], os)? } else { rec.alloc_temp(ctx, os)? };
        let ca = if i == 1 { coef(0) } else { 1.0 };
        let p = BinaryParams::new(os, sa, sb, code, ca, coef(i), None);
        let b = rec.buf_of(io.bottoms[i]);
        ew(rec, pipe.clone(), vec![acc, b, dst.clone()], &p.words(), os.len())?;
        acc = dst;
        acc_shape = os;
    }
    Ok(())
}
