//! The plain CPU reference: a naive, single-threaded implementation of every [`Op`], following
//! ncnn's semantics. It is the ground truth the fast backends are tested against, so every function
//! here favours being obviously correct over being fast. Long (~1060 lines) on purpose: one plain
//! function per op, kept in one file as the single ground truth rather than spread by op family.
//!
//! Shape conventions follow ncnn: a 3-D blob is (c, h, w), a 2-D blob (h, w), a 1-D blob (w).
//! "Axis" numbering is ncnn's: for a 3-D blob axis 0 = c, 1 = h, 2 = w; negative axes count from
//! the end. Shape errors that depend on the input give `invalid_argument`; layer descriptions this
//! module cannot execute give `model_invalid`.
//!
//! Long (~1060 lines) on purpose: one naive function per op, the whole ground truth in one file, so a
//! reviewer checks the semantics of every layer in one place.

use crate::bail;
use crate::error::{Code, Error, Result};
use crate::ncnn::model::{
    Activation, BinaryOpKind, Conv, Crop, EltwiseKind, Interp, Layer, Net, Op, Padding, PoolKind, Pooling,
};
use crate::tensor::Tensor;

// ---------------------------------------------------------------------------------------------
// shape helpers

/// The shape as ncnn axis order: [c, h, w], [h, w] or [w].
pub fn shape_of(t: &Tensor) -> Vec<usize> {
    match t.dims {
        1 => vec![t.w],
        2 => vec![t.h, t.w],
        _ => vec![t.c, t.h, t.w],
    }
}

/// Build a tensor from an ncnn-ordered shape ([w], [h, w] or [c, h, w]).
pub fn tensor_of_shape(shape: &[usize], data: Vec<f32>) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    if n != data.len() {
        bail!(Code::Internal, "shape {:?} does not match {} values", shape, data.len());
    }
    Ok(match shape.len() {
        1 => Tensor { dims: 1, c: 1, h: 1, w: shape[0], data },
        2 => Tensor { dims: 2, c: 1, h: shape[0], w: shape[1], data },
        3 => Tensor { dims: 3, c: shape[0], h: shape[1], w: shape[2], data },
        r => bail!(Code::InvalidArgument, "rank {r} blobs are not supported"),
    })
}

fn check_tensor(t: &Tensor) -> Result<()> {
    if !(1..=3).contains(&t.dims) || t.c * t.h * t.w != t.data.len() {
        bail!(Code::InvalidArgument, "malformed tensor {} with {} values", t.shape_string(), t.data.len());
    }
    Ok(())
}

fn resolve_axis(axis: i32, dims: usize) -> Result<usize> {
    let a = if axis < 0 { axis + dims as i32 } else { axis };
    if a < 0 || a as usize >= dims {
        bail!(Code::InvalidArgument, "axis {axis} is out of range for a {dims}-D blob");
    }
    Ok(a as usize)
}

/// (outer, axis length, inner) for a contiguous view around `axis`.
fn split_at_axis(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    (outer, shape[axis], inner)
}

fn map(x: &Tensor, f: impl Fn(f32) -> f32) -> Tensor {
    Tensor { dims: x.dims, c: x.c, h: x.h, w: x.w, data: x.data.iter().map(|&v| f(v)).collect() }
}

/// Per-"channel" parameter application as ncnn's PReLU / BatchNorm / Scale do it: 1-D blobs index
/// the parameter by element, 2-D by row, 3-D by channel.
fn per_channel(x: &Tensor, n_params: usize, what: &str, f: impl Fn(usize, f32) -> f32) -> Result<Tensor> {
    let (groups, inner) = match x.dims {
        1 => (x.w, 1),
        2 => (x.h, x.w),
        _ => (x.c, x.h * x.w),
    };
    if n_params != groups && n_params != 1 {
        bail!(Code::InvalidArgument, "{what}: {n_params} parameters for {groups} channels of {}", x.shape_string());
    }
    let mut out = x.clone();
    for g in 0..groups {
        let pi = if n_params == 1 { 0 } else { g };
        for v in &mut out.data[g * inner..(g + 1) * inner] {
            *v = f(pi, *v);
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// convolution

/// Output size and explicit pads of a convolution on a `w` x `h` input.
pub fn conv_geometry(c: &Conv, w: usize, h: usize) -> Result<ConvGeometry> {
    let kext_w = c.dilation_w * (c.kernel_w - 1) + 1;
    let kext_h = c.dilation_h * (c.kernel_h - 1) + 1;
    let (pl, pr, pt, pb) = c.pad.resolve(w, h, kext_w, kext_h, c.stride_w, c.stride_h);
    let wp = w + pl + pr;
    let hp = h + pt + pb;
    if wp < kext_w || hp < kext_h {
        bail!(Code::InvalidArgument, "input {w}x{h} is smaller than the {kext_w}x{kext_h} kernel");
    }
    Ok(ConvGeometry {
        pad_left: pl,
        pad_top: pt,
        out_w: (wp - kext_w) / c.stride_w + 1,
        out_h: (hp - kext_h) / c.stride_h + 1,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvGeometry {
    pub pad_left: usize,
    pub pad_top: usize,
    pub out_w: usize,
    pub out_h: usize,
}

fn conv_input_check(c: &Conv, x: &Tensor) -> Result<()> {
    check_tensor(x)?;
    if x.dims != 3 || x.c != c.num_input {
        bail!(Code::InvalidArgument, "convolution expects {} input channels, got {}", c.num_input, x.shape_string());
    }
    if c.weight.len() != c.num_output * c.in_per_group() * c.kernel_w * c.kernel_h {
        bail!(Code::ModelInvalid, "convolution weight size does not match its shape");
    }
    if let Some(b) = &c.bias {
        if b.len() != c.num_output {
            bail!(Code::ModelInvalid, "convolution bias size does not match num_output");
        }
    }
    Ok(())
}

/// Convolution / ConvolutionDepthWise (group >= 1), with bias and fused activation.
pub fn conv(c: &Conv, x: &Tensor) -> Result<Tensor> {
    conv_input_check(c, x)?;
    let g = conv_geometry(c, x.w, x.h)?;
    let (ipg, opg) = (c.in_per_group(), c.out_per_group());
    let mut out = Tensor::zeros(c.num_output, g.out_h, g.out_w);
    for o in 0..c.num_output {
        let grp = o / opg;
        for oy in 0..g.out_h {
            for ox in 0..g.out_w {
                let mut sum = c.bias.as_ref().map(|b| b[o]).unwrap_or(0.0);
                for i in 0..ipg {
                    let ic = grp * ipg + i;
                    for ky in 0..c.kernel_h {
                        for kx in 0..c.kernel_w {
                            let iy = (oy * c.stride_h + ky * c.dilation_h) as isize - g.pad_top as isize;
                            let ix = (ox * c.stride_w + kx * c.dilation_w) as isize - g.pad_left as isize;
                            let v = if iy < 0 || ix < 0 || iy >= x.h as isize || ix >= x.w as isize {
                                c.pad_value
                            } else {
                                x.at(ic, iy as usize, ix as usize)
                            };
                            let wi = ((o * ipg + i) * c.kernel_h + ky) * c.kernel_w + kx;
                            sum += v * c.weight[wi];
                        }
                    }
                }
                out.data[(o * g.out_h + oy) * g.out_w + ox] = c.activation.apply(sum);
            }
        }
    }
    Ok(out)
}

/// Output size of a deconvolution before and after the pad cut:
/// (full_w, full_h, cut_left, cut_top, out_w, out_h).
pub fn deconv_geometry(c: &Conv, w: usize, h: usize) -> Result<(usize, usize, usize, usize, usize, usize)> {
    if w == 0 || h == 0 {
        bail!(Code::InvalidArgument, "empty deconvolution input");
    }
    let kext_w = c.dilation_w * (c.kernel_w - 1) + 1;
    let kext_h = c.dilation_h * (c.kernel_h - 1) + 1;
    let full_w = (w - 1) * c.stride_w + kext_w + c.output_pad_right;
    let full_h = (h - 1) * c.stride_h + kext_h + c.output_pad_bottom;
    let (l, r, t, b) = match c.pad {
        Padding::Explicit { left, right, top, bottom } => (left, right, top, bottom),
        Padding::SameUpper | Padding::SameLower if c.output_w > 0 && c.output_h > 0 => {
            if full_w < c.output_w || full_h < c.output_h {
                bail!(Code::InvalidArgument, "deconvolution output {}x{} exceeds {full_w}x{full_h}", c.output_w, c.output_h);
            }
            let wcut = full_w - c.output_w;
            let hcut = full_h - c.output_h;
            if c.pad == Padding::SameUpper {
                (wcut / 2, wcut - wcut / 2, hcut / 2, hcut - hcut / 2)
            } else {
                (wcut - wcut / 2, wcut / 2, hcut - hcut / 2, hcut / 2)
            }
        }
        _ => (0, 0, 0, 0),
    };
    if l + r >= full_w || t + b >= full_h {
        bail!(Code::InvalidArgument, "deconvolution pads cut the whole {full_w}x{full_h} output");
    }
    Ok((full_w, full_h, l, t, full_w - l - r, full_h - t - b))
}

/// Deconvolution / DeconvolutionDepthWise: scatter each input pixel through the kernel into the
/// full output, add bias, apply the activation, then cut the padding.
pub fn deconv(c: &Conv, x: &Tensor) -> Result<Tensor> {
    conv_input_check(c, x)?;
    let (full_w, full_h, cut_l, cut_t, ow, oh) = deconv_geometry(c, x.w, x.h)?;
    let (ipg, opg) = (c.in_per_group(), c.out_per_group());
    let mut full = vec![0.0f32; c.num_output * full_h * full_w];
    for o in 0..c.num_output {
        let grp = o / opg;
        for i in 0..ipg {
            let ic = grp * ipg + i;
            for y in 0..x.h {
                for xx in 0..x.w {
                    let v = x.at(ic, y, xx);
                    for ky in 0..c.kernel_h {
                        for kx in 0..c.kernel_w {
                            let oy = y * c.stride_h + ky * c.dilation_h;
                            let ox = xx * c.stride_w + kx * c.dilation_w;
                            let wi = ((o * ipg + i) * c.kernel_h + ky) * c.kernel_w + kx;
                            full[(o * full_h + oy) * full_w + ox] += v * c.weight[wi];
                        }
                    }
                }
            }
        }
    }
    let mut out = Tensor::zeros(c.num_output, oh, ow);
    for o in 0..c.num_output {
        let b = c.bias.as_ref().map(|b| b[o]).unwrap_or(0.0);
        for y in 0..oh {
            for xx in 0..ow {
                let v = full[(o * full_h + y + cut_t) * full_w + xx + cut_l] + b;
                out.data[(o * oh + y) * ow + xx] = c.activation.apply(v);
            }
        }
    }
    Ok(out)
}

/// InnerProduct: flattens its input to `num_input` values and returns a 1-D blob.
pub fn inner_product(
    num_output: usize,
    num_input: usize,
    weight: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    x: &Tensor,
) -> Result<Tensor> {
    check_tensor(x)?;
    if x.data.len() != num_input || weight.len() != num_output * num_input {
        bail!(Code::InvalidArgument, "inner product expects {num_input} inputs, got {}", x.shape_string());
    }
    let mut out = Vec::with_capacity(num_output);
    for o in 0..num_output {
        let mut s = bias.map(|b| b[o]).unwrap_or(0.0);
        for i in 0..num_input {
            s += weight[o * num_input + i] * x.data[i];
        }
        out.push(act.apply(s));
    }
    Ok(Tensor::vector(out))
}

// ---------------------------------------------------------------------------------------------
// element-wise and per-channel ops

pub fn relu(x: &Tensor, slope: f32) -> Tensor {
    map(x, |v| if v < 0.0 { v * slope } else { v })
}

/// PReLU: one slope is shared by all channels, otherwise one per channel.
pub fn prelu(x: &Tensor, slope: &[f32]) -> Result<Tensor> {
    per_channel(x, slope.len(), "PReLU", |c, v| if v < 0.0 { v * slope[c] } else { v })
}

pub fn sigmoid(x: &Tensor) -> Tensor {
    map(x, |v| 1.0 / (1.0 + (-v).exp()))
}

pub fn tanh(x: &Tensor) -> Tensor {
    map(x, |v| v.tanh())
}

pub fn clip(x: &Tensor, min: f32, max: f32) -> Tensor {
    map(x, |v| v.max(min).min(max))
}

pub fn channel_affine(x: &Tensor, scale: &[f32], bias: &[f32]) -> Result<Tensor> {
    if scale.len() != bias.len() {
        bail!(Code::ModelInvalid, "affine scale and bias sizes differ");
    }
    per_channel(x, scale.len(), "ChannelAffine", |c, v| v * scale[c] + bias[c])
}

pub fn binary_scalar(op: BinaryOpKind, a: f32, b: f32) -> f32 {
    match op {
        BinaryOpKind::Add => a + b,
        BinaryOpKind::Sub => a - b,
        BinaryOpKind::Mul => a * b,
        BinaryOpKind::Div => a / b,
        BinaryOpKind::Max => a.max(b),
        BinaryOpKind::Min => a.min(b),
        BinaryOpKind::Pow => a.powf(b),
        BinaryOpKind::RSub => b - a,
        BinaryOpKind::RDiv => b / a,
    }
}

/// How the smaller operand of a BinaryOp maps onto the bigger one's elements.
#[derive(Clone, Copy)]
enum Bcast {
    Same,
    Scalar,
    /// index = (element / inner) % n
    Outer { inner: usize, n: usize },
}

fn bcast_rule(big: &Tensor, small: &Tensor) -> Option<Bcast> {
    if shape_of(big) == shape_of(small) {
        return Some(Bcast::Same);
    }
    if small.data.len() == 1 {
        return Some(Bcast::Scalar);
    }
    match (big.dims, small.dims) {
        // 3-D op 1-D of length c: per channel.
        (3, 1) if small.w == big.c => Some(Bcast::Outer { inner: big.h * big.w, n: big.c }),
        // 3-D op (c,1,1): per channel.
        (3, 3) if small.c == big.c && small.h == 1 && small.w == 1 => Some(Bcast::Outer { inner: big.h * big.w, n: big.c }),
        // 3-D op (1,h,w) / 2-D (h,w): per plane element, shared over channels.
        (3, 3) if small.c == 1 && small.h == big.h && small.w == big.w => Some(Bcast::Outer { inner: 1, n: big.h * big.w }),
        (3, 2) if small.h == big.h && small.w == big.w => Some(Bcast::Outer { inner: 1, n: big.h * big.w }),
        // 2-D op 1-D of length h: per row.
        (2, 1) if small.w == big.h => Some(Bcast::Outer { inner: big.w, n: big.h }),
        _ => None,
    }
}

/// BinaryOp with ncnn broadcasting: equal shapes, a one-element operand, 3-D op 1-D (per channel,
/// vector length = channels), 3-D op (c,1,1), 3-D op 2-D/(1,h,w) (shared over channels), 2-D op
/// 1-D (per row); either operand may be the bigger one.
pub fn binary(op: BinaryOpKind, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    check_tensor(a)?;
    check_tensor(b)?;
    let a_big = a.data.len() >= b.data.len() && (a.dims >= b.dims || a.data.len() > b.data.len());
    let (big, small) = if a_big { (a, b) } else { (b, a) };
    let rule = match bcast_rule(big, small) {
        Some(r) => r,
        None => bail!(Code::InvalidArgument, "BinaryOp cannot broadcast {} with {}", a.shape_string(), b.shape_string()),
    };
    let mut out = big.clone();
    for (i, v) in out.data.iter_mut().enumerate() {
        let s = match rule {
            Bcast::Same => small.data[i],
            Bcast::Scalar => small.data[0],
            Bcast::Outer { inner, n } => small.data[(i / inner) % n],
        };
        *v = if a_big { binary_scalar(op, *v, s) } else { binary_scalar(op, s, *v) };
    }
    Ok(out)
}

pub fn binary_with_scalar(op: BinaryOpKind, a: &Tensor, b: f32) -> Tensor {
    map(a, |v| binary_scalar(op, v, b))
}

/// Eltwise over same-shaped inputs; Sum uses `coeffs` when given (one per input).
pub fn eltwise(op: EltwiseKind, coeffs: &[f32], xs: &[&Tensor]) -> Result<Tensor> {
    if xs.is_empty() {
        bail!(Code::ModelInvalid, "Eltwise without inputs");
    }
    for x in xs {
        check_tensor(x)?;
        if shape_of(x) != shape_of(xs[0]) {
            bail!(Code::InvalidArgument, "Eltwise inputs differ in shape: {} vs {}", xs[0].shape_string(), x.shape_string());
        }
    }
    if op == EltwiseKind::Sum && !coeffs.is_empty() && coeffs.len() != xs.len() {
        bail!(Code::ModelInvalid, "Eltwise has {} coefficients for {} inputs", coeffs.len(), xs.len());
    }
    let mut out = xs[0].clone();
    for (i, v) in out.data.iter_mut().enumerate() {
        *v = match op {
            EltwiseKind::Prod => xs.iter().map(|x| x.data[i]).product(),
            EltwiseKind::Max => xs.iter().map(|x| x.data[i]).fold(f32::NEG_INFINITY, f32::max),
            EltwiseKind::Sum if coeffs.is_empty() => xs.iter().map(|x| x.data[i]).sum(),
            EltwiseKind::Sum => xs.iter().zip(coeffs).map(|(x, c)| x.data[i] * c).sum(),
        };
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// layout ops

/// PixelShuffle (DepthToSpace). Mode 0 (PyTorch pixel_shuffle): output channel p, offset (dy, dx)
/// reads input channel p*r*r + dy*r + dx. Mode 1 (DCR): input channel (dy*r + dx)*outc + p.
pub fn pixel_shuffle(x: &Tensor, r: usize, mode: i32) -> Result<Tensor> {
    check_tensor(x)?;
    if x.dims != 3 || r == 0 || x.c % (r * r) != 0 {
        bail!(Code::InvalidArgument, "PixelShuffle x{r} needs a 3-D blob with channels divisible by {}, got {}", r * r, x.shape_string());
    }
    let oc = x.c / (r * r);
    let (oh, ow) = (x.h * r, x.w * r);
    let mut out = Tensor::zeros(oc, oh, ow);
    for p in 0..oc {
        for dy in 0..r {
            for dx in 0..r {
                let q = if mode == 0 { p * r * r + dy * r + dx } else { (dy * r + dx) * oc + p };
                for y in 0..x.h {
                    for xx in 0..x.w {
                        out.data[(p * oh + y * r + dy) * ow + xx * r + dx] = x.at(q, y, xx);
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Interp output size: fixed output size when given, else int(size * scale).
pub fn interp_out_size(p: &Interp, w: usize, h: usize) -> (usize, usize) {
    if p.output_w > 0 && p.output_h > 0 {
        (p.output_w, p.output_h)
    } else {
        ((w as f32 * p.width_scale) as usize, (h as f32 * p.height_scale) as usize)
    }
}

/// Source coordinates along one axis for linear/cubic interpolation: (floor index, fraction).
fn interp_src(dst: usize, in_len: usize, out_len: usize, align_corner: bool) -> (isize, f32) {
    let f = if align_corner {
        let scale = if out_len > 1 { (in_len as f64 - 1.0) / (out_len as f64 - 1.0) } else { 0.0 };
        (dst as f64 * scale) as f32
    } else {
        let scale = in_len as f64 / out_len as f64;
        ((dst as f64 + 0.5) * scale - 0.5) as f32
    };
    let i = f.floor();
    (i as isize, f - i)
}

/// Keys cubic weights with A = -0.75 for taps at offsets -1, 0, 1, 2 from the floor index.
pub fn cubic_weights(t: f32) -> [f32; 4] {
    const A: f32 = -0.75;
    let x0 = t + 1.0;
    let x1 = t;
    let x2 = 1.0 - t;
    let w0 = ((A * x0 - 5.0 * A) * x0 + 8.0 * A) * x0 - 4.0 * A;
    let w1 = ((A + 2.0) * x1 - (A + 3.0)) * x1 * x1 + 1.0;
    let w2 = ((A + 2.0) * x2 - (A + 3.0)) * x2 * x2 + 1.0;
    [w0, w1, w2, 1.0 - w0 - w1 - w2]
}

/// Interp on a 3-D blob. Nearest: src = min(floor(dst * (1/scale)), size-1), where 1/scale is
/// in/out when a fixed output size is given. Bilinear / bicubic: half-pixel centres
/// ((dst + 0.5) * in/out - 0.5) or, with align_corner, dst * (in-1)/(out-1); taps outside the
/// input are clamped to the edge (what ncnn's coefficient shuffling amounts to).
pub fn interp(p: &Interp, x: &Tensor) -> Result<Tensor> {
    check_tensor(x)?;
    if x.dims != 3 {
        bail!(Code::InvalidArgument, "Interp supports 3-D blobs, got {}", x.shape_string());
    }
    let (ow, oh) = interp_out_size(p, x.w, x.h);
    if ow == 0 || oh == 0 || x.w == 0 || x.h == 0 {
        bail!(Code::InvalidArgument, "Interp to an empty {ow}x{oh} output");
    }
    let mut out = Tensor::zeros(x.c, oh, ow);
    let clampi = |i: isize, n: usize| i.clamp(0, n as isize - 1) as usize;
    match p.resize_type {
        1 => {
            let hs = if p.output_h > 0 && p.output_w > 0 { x.h as f32 / p.output_h as f32 } else { 1.0 / p.height_scale };
            let ws = if p.output_h > 0 && p.output_w > 0 { x.w as f32 / p.output_w as f32 } else { 1.0 / p.width_scale };
            for c in 0..x.c {
                for y in 0..oh {
                    let sy = ((y as f32 * hs) as usize).min(x.h - 1);
                    for xx in 0..ow {
                        let sx = ((xx as f32 * ws) as usize).min(x.w - 1);
                        out.data[(c * oh + y) * ow + xx] = x.at(c, sy, sx);
                    }
                }
            }
        }
        2 => {
            for c in 0..x.c {
                for y in 0..oh {
                    let (sy, fy) = interp_src(y, x.h, oh, p.align_corner);
                    for xx in 0..ow {
                        let (sx, fx) = interp_src(xx, x.w, ow, p.align_corner);
                        let v = |yy: isize, xi: isize| x.at(c, clampi(yy, x.h), clampi(xi, x.w));
                        let top = v(sy, sx) * (1.0 - fx) + v(sy, sx + 1) * fx;
                        let bot = v(sy + 1, sx) * (1.0 - fx) + v(sy + 1, sx + 1) * fx;
                        out.data[(c * oh + y) * ow + xx] = top * (1.0 - fy) + bot * fy;
                    }
                }
            }
        }
        3 => {
            for c in 0..x.c {
                for y in 0..oh {
                    let (sy, fy) = interp_src(y, x.h, oh, p.align_corner);
                    let wy = cubic_weights(fy);
                    for xx in 0..ow {
                        let (sx, fx) = interp_src(xx, x.w, ow, p.align_corner);
                        let wx = cubic_weights(fx);
                        let mut s = 0.0;
                        for (j, wyj) in wy.iter().enumerate() {
                            let yy = clampi(sy - 1 + j as isize, x.h);
                            let mut row = 0.0;
                            for (i, wxi) in wx.iter().enumerate() {
                                row += x.at(c, yy, clampi(sx - 1 + i as isize, x.w)) * wxi;
                            }
                            s += row * wyj;
                        }
                        out.data[(c * oh + y) * ow + xx] = s;
                    }
                }
            }
        }
        t => bail!(Code::ModelInvalid, "Interp resize type {t} is not supported"),
    }
    Ok(out)
}

/// Concat along an ncnn axis (negative counts from the end). All other axes must match.
pub fn concat(axis: i32, xs: &[&Tensor]) -> Result<Tensor> {
    if xs.is_empty() {
        bail!(Code::ModelInvalid, "Concat without inputs");
    }
    let dims = xs[0].dims as usize;
    let ax = resolve_axis(axis, dims)?;
    let s0 = shape_of(xs[0]);
    let mut total = 0;
    for x in xs {
        check_tensor(x)?;
        let s = shape_of(x);
        if s.len() != dims || (0..dims).any(|i| i != ax && s[i] != s0[i]) {
            bail!(Code::InvalidArgument, "Concat inputs {} and {} do not fit on axis {axis}", xs[0].shape_string(), x.shape_string());
        }
        total += s[ax];
    }
    let mut shape = s0.clone();
    shape[ax] = total;
    let (outer, _, inner) = split_at_axis(&shape, ax);
    let mut data = Vec::with_capacity(shape.iter().product());
    for o in 0..outer {
        for x in xs {
            let n = shape_of(x)[ax] * inner;
            data.extend_from_slice(&x.data[o * n..(o + 1) * n]);
        }
    }
    tensor_of_shape(&shape, data)
}

fn crop_region(x: &Tensor, off: [usize; 3], size: [usize; 3]) -> Result<Tensor> {
    // off/size in (c, h, w) order; for lower-rank blobs the unused leading entries are 0 / 1.
    let [c0, h0, w0] = off;
    let [cn, hn, wn] = size;
    if cn == 0 || hn == 0 || wn == 0 || c0 + cn > x.c || h0 + hn > x.h || w0 + wn > x.w {
        bail!(Code::InvalidArgument, "Crop region {:?}+{:?} does not fit {}", off, size, x.shape_string());
    }
    let mut data = Vec::with_capacity(cn * hn * wn);
    for c in c0..c0 + cn {
        for y in h0..h0 + hn {
            let base = (c * x.h + y) * x.w;
            data.extend_from_slice(&x.data[base + w0..base + w0 + wn]);
        }
    }
    Ok(Tensor { dims: x.dims, c: cn, h: hn, w: wn, data })
}

/// Crop: numpy-style starts/ends/axes (negative values count from the end; an end of 0 or -233
/// means "to the end", as in ncnn), else fixed offsets + sizes (-233 = remaining, and
/// woffset2/hoffset2/coffset2 trim the far side), or, with a second input, the reference blob's
/// size at the fixed offsets.
pub fn crop(p: &Crop, x: &Tensor, reference: Option<&Tensor>) -> Result<Tensor> {
    check_tensor(x)?;
    let dims = x.dims as usize;
    let (w, h, c) = (x.w as i64, x.h as i64, x.c as i64);
    // (offset, size) per (c, h, w)
    let mut r = [(0i64, c), (0i64, h), (0i64, w)];
    if let Some(rf) = reference {
        r[2] = (p.woffset as i64, rf.w as i64);
        if dims >= 2 {
            r[1] = (p.hoffset as i64, rf.h as i64);
        }
        if dims == 3 {
            r[0] = (p.coffset as i64, if rf.dims == 3 { rf.c as i64 } else { c });
        }
    } else if !p.starts.is_empty() && !p.ends.is_empty() {
        let n = if p.axes.is_empty() { dims } else { p.axes.len() };
        if p.starts.len() < n || p.ends.len() < n {
            bail!(Code::ModelInvalid, "Crop has fewer starts/ends than axes");
        }
        for i in 0..n {
            let axis = if p.axes.is_empty() { i } else { resolve_axis(p.axes[i], dims)? };
            // map the ncnn axis of a `dims`-D blob onto the (c, h, w) slots
            let slot = axis + (3 - dims);
            let len = [c, h, w][slot];
            let mut start = p.starts[i] as i64;
            let mut end = p.ends[i] as i64;
            if start == -233 {
                start = 0;
            }
            if end == -233 {
                end = len;
            }
            let off = if start >= 0 { start } else { len + start };
            let size = len.min(if end > 0 { end } else { len + end }) - off;
            r[slot] = (off, size);
        }
    } else {
        if p.hoffset == -233 || p.coffset == -233 {
            bail!(Code::ModelInvalid, "Crop with axis-shifted offsets (-233) is not supported");
        }
        let side = |off: i32, off2: i32, out: i32, len: i64| -> (i64, i64) {
            let mut size = len - off as i64 - off2 as i64;
            if out != -233 {
                size = size.min(out as i64);
            }
            (off as i64, size)
        };
        r[2] = side(p.woffset, p.woffset2, p.outw, w);
        if dims >= 2 {
            r[1] = side(p.hoffset, p.hoffset2, p.outh, h);
        }
        if dims == 3 {
            r[0] = side(p.coffset, p.coffset2, p.outc, c);
        }
    }
    for &(o, s) in &r {
        if o < 0 || s <= 0 {
            bail!(Code::InvalidArgument, "Crop of {} resolves to an empty or negative region", x.shape_string());
        }
    }
    crop_region(x, [r[0].0 as usize, r[1].0 as usize, r[2].0 as usize], [r[0].1 as usize, r[1].1 as usize, r[2].1 as usize])
}

/// Pooling (max / average; global -> 1-D blob of channel values; adaptive -> out_w x out_h bins).
pub fn pooling(p: &Pooling, x: &Tensor) -> Result<Tensor> {
    check_tensor(x)?;
    if x.dims != 3 || x.w == 0 || x.h == 0 {
        bail!(Code::InvalidArgument, "Pooling needs a 3-D blob, got {}", x.shape_string());
    }
    let (c, h, w) = (x.c, x.h, x.w);
    if p.global {
        let mut out = Vec::with_capacity(c);
        for ch in 0..c {
            let s = x.channel(ch);
            out.push(match p.kind {
                PoolKind::Max => s.iter().copied().fold(f32::NEG_INFINITY, f32::max),
                PoolKind::Avg => s.iter().sum::<f32>() / s.len() as f32,
            });
        }
        return Ok(Tensor::vector(out));
    }
    if p.adaptive {
        let (ow, oh) = (if p.out_w == 0 { w } else { p.out_w }, if p.out_h == 0 { h } else { p.out_h });
        let mut out = Tensor::zeros(c, oh, ow);
        for ch in 0..c {
            for oy in 0..oh {
                let (y0, y1) = (oy * h / oh, ((oy + 1) * h).div_ceil(oh));
                for ox in 0..ow {
                    let (x0, x1) = (ox * w / ow, ((ox + 1) * w).div_ceil(ow));
                    let mut m = f32::NEG_INFINITY;
                    let mut s = 0.0;
                    for yy in y0..y1 {
                        for xx in x0..x1 {
                            let v = x.at(ch, yy, xx);
                            m = m.max(v);
                            s += v;
                        }
                    }
                    out.data[(ch * oh + oy) * ow + ox] = match p.kind {
                        PoolKind::Max => m,
                        PoolKind::Avg => s / ((y1 - y0) * (x1 - x0)) as f32,
                    };
                }
            }
        }
        return Ok(out);
    }
    if p.kernel_w == 0 || p.kernel_h == 0 || p.stride_w == 0 || p.stride_h == 0 {
        bail!(Code::ModelInvalid, "Pooling with zero kernel or stride");
    }
    // Bordered input extents: (top, bottom, left, right) pads.
    let (kw, kh, sw, sh) = (p.kernel_w, p.kernel_h, p.stride_w, p.stride_h);
    let (pt, pb, pl, pr) = match p.pad_mode {
        0 => {
            let tail = |n: usize, a: usize, b: usize, k: usize, s: usize| -> Result<usize> {
                if n + a + b < k {
                    bail!(Code::InvalidArgument, "Pooling input smaller than its kernel");
                }
                let t = (n + a + b - k) % s;
                Ok(if t != 0 { s - t } else { 0 })
            };
            let ht = tail(h, p.pad_top, p.pad_bottom, kh, sh)?;
            let wt = tail(w, p.pad_left, p.pad_right, kw, sw)?;
            (p.pad_top, p.pad_bottom + ht, p.pad_left, p.pad_right + wt)
        }
        1 => (p.pad_top, p.pad_bottom, p.pad_left, p.pad_right),
        2 | 3 => {
            let wpad = (kw + (w - 1) / sw * sw).saturating_sub(w);
            let hpad = (kh + (h - 1) / sh * sh).saturating_sub(h);
            if p.pad_mode == 2 {
                (hpad / 2, hpad - hpad / 2, wpad / 2, wpad - wpad / 2)
            } else {
                (hpad - hpad / 2, hpad / 2, wpad - wpad / 2, wpad / 2)
            }
        }
        m => bail!(Code::ModelInvalid, "Pooling pad mode {m} is not supported"),
    };
    let (bh, bw) = (h + pt + pb, w + pl + pr);
    if bh < kh || bw < kw {
        bail!(Code::InvalidArgument, "Pooling input {w}x{h} smaller than the {kw}x{kh} kernel");
    }
    let (oh, ow) = ((bh - kh) / sh + 1, (bw - kw) / sw + 1);
    // In ncnn the "exclude pad" count uses the layer's pad parameters (plus the full-mode tail),
    // measured on the bordered input.
    let (tail_h, tail_w) = if p.pad_mode == 0 { (pb - p.pad_bottom, pr - p.pad_right) } else { (0, 0) };
    let mut out = Tensor::zeros(c, oh, ow);
    for ch in 0..c {
        for oy in 0..oh {
            for ox in 0..ow {
                let mut m = f32::NEG_INFINITY;
                let mut sum = 0.0f32;
                let mut area = 0usize;
                for ky in 0..kh {
                    let by = oy * sh + ky;
                    for kx in 0..kw {
                        let bx = ox * sw + kx;
                        let inside = by >= pt && by < pt + h && bx >= pl && bx < pl + w;
                        let v = if inside { x.at(ch, by - pt, bx - pl) } else if p.kind == PoolKind::Max { f32::MIN } else { 0.0 };
                        m = m.max(v);
                        let counted = by >= p.pad_top
                            && by + p.pad_bottom + tail_h < bh
                            && bx >= p.pad_left
                            && bx + p.pad_right + tail_w < bw;
                        if p.count_include_pad || counted {
                            sum += v;
                            area += 1;
                        }
                    }
                }
                out.data[(ch * oh + oy) * ow + ox] = match p.kind {
                    PoolKind::Max => m,
                    PoolKind::Avg if p.count_include_pad => sum / (kw * kh) as f32,
                    PoolKind::Avg => if area > 0 { sum / area as f32 } else { 0.0 },
                };
            }
        }
    }
    Ok(out)
}

/// Permute: 2-D order 0 (keep) / 1 (transpose); 3-D order types 0..5 give the output (w, h, c)
/// axes as input axes: 0 (w,h,c) 1 (h,w,c) 2 (w,c,h) 3 (c,w,h) 4 (h,c,w) 5 (c,h,w).
pub fn permute(x: &Tensor, order_type: i32) -> Result<Tensor> {
    check_tensor(x)?;
    match (x.dims, order_type) {
        (1, _) | (_, 0) => Ok(x.clone()),
        (2, 1) => {
            let mut data = Vec::with_capacity(x.len());
            for i in 0..x.w {
                for j in 0..x.h {
                    data.push(x.data[j * x.w + i]);
                }
            }
            Ok(Tensor::matrix(x.w, x.h, data))
        }
        (3, 1..=5) => {
            // input axis index per output axis: 0 = w, 1 = h, 2 = c
            let order: [usize; 3] = match order_type {
                1 => [1, 0, 2],
                2 => [0, 2, 1],
                3 => [2, 0, 1],
                4 => [1, 2, 0],
                _ => [2, 1, 0],
            };
            let in_ext = [x.w, x.h, x.c];
            let (ow, oh, oc) = (in_ext[order[0]], in_ext[order[1]], in_ext[order[2]]);
            let mut out = Tensor::zeros(oc, oh, ow);
            for q in 0..oc {
                for i in 0..oh {
                    for j in 0..ow {
                        let mut src = [0usize; 3];
                        src[order[0]] = j;
                        src[order[1]] = i;
                        src[order[2]] = q;
                        out.data[(q * oh + i) * ow + j] = x.at(src[2], src[1], src[0]);
                    }
                }
            }
            Ok(out)
        }
        _ => bail!(Code::ModelInvalid, "Permute order type {order_type} is not supported for {}", x.shape_string()),
    }
}

/// Reshape with ncnn semantics: -233 = axis absent (sets the rank), 0 = keep the input's size on
/// that axis, -1 = infer from the total.
pub fn reshape(x: &Tensor, w: i32, h: i32, c: i32) -> Result<Tensor> {
    check_tensor(x)?;
    let total = x.len() as i64;
    let rank = if c != -233 { 3 } else if h != -233 { 2 } else { 1 };
    let keep = |v: i32, from: usize| -> i64 { if v == 0 { from as i64 } else { v as i64 } };
    let mut dims: Vec<i64> = match rank {
        1 => vec![keep(w, x.w)],
        2 => vec![keep(h, x.h), keep(w, x.w)],
        _ => vec![keep(c, x.c), keep(h, x.h), keep(w, x.w)],
    };
    let unknown: Vec<usize> = (0..dims.len()).filter(|&i| dims[i] == -1).collect();
    if unknown.len() > 1 || dims.iter().any(|&d| d < -1 || d == 0) {
        bail!(Code::InvalidArgument, "Reshape to {w},{h},{c} is ambiguous or invalid");
    }
    if let Some(&u) = unknown.first() {
        let known: i64 = dims.iter().filter(|&&d| d != -1).product();
        if known == 0 || total % known != 0 {
            bail!(Code::InvalidArgument, "Reshape of {} values to {w},{h},{c}", total);
        }
        dims[u] = total / known;
    }
    if dims.iter().product::<i64>() != total {
        bail!(Code::InvalidArgument, "Reshape of {} ({} values) to {:?}", x.shape_string(), total, dims);
    }
    let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
    tensor_of_shape(&shape, x.data.clone())
}

pub fn flatten(x: &Tensor) -> Tensor {
    Tensor::vector(x.data.clone())
}

/// Softmax along an ncnn axis.
pub fn softmax(x: &Tensor, axis: i32) -> Result<Tensor> {
    check_tensor(x)?;
    let shape = shape_of(x);
    let ax = resolve_axis(axis, shape.len())?;
    let (outer, n, inner) = split_at_axis(&shape, ax);
    let mut out = x.clone();
    for o in 0..outer {
        for i in 0..inner {
            let idx = |k: usize| (o * n + k) * inner + i;
            let m = (0..n).map(|k| x.data[idx(k)]).fold(f32::NEG_INFINITY, f32::max);
            let mut s = 0.0;
            for k in 0..n {
                let e = (x.data[idx(k)] - m).exp();
                out.data[idx(k)] = e;
                s += e;
            }
            for k in 0..n {
                out.data[idx(k)] /= s;
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// RIFE warp

/// Checks a warp's operands: a 3-D image and a 3-D flow of 2 channels (x then y displacement, in
/// pixels) with the image's height and width.
pub fn check_warp_args(image: &Tensor, flow: &Tensor) -> Result<()> {
    check_tensor(image)?;
    check_tensor(flow)?;
    if image.dims != 3 || flow.dims != 3 || flow.c != 2 || flow.h != image.h || flow.w != image.w || image.h == 0 || image.w == 0 {
        bail!(Code::InvalidArgument, "Warp needs an image [w,h,c] and a flow [w,h,2] of the same size, got {} and {}", image.shape_string(), flow.shape_string());
    }
    Ok(())
}

/// Where one output pixel samples along one axis: the sample point `i + d` clamped to
/// [0, n - 1], then (low tap, high tap, weight of the high tap).
#[inline]
pub fn warp_taps(i: usize, d: f32, n: usize) -> (usize, usize, f32) {
    let last = (n - 1) as f32;
    let s = (i as f32 + d).max(0.0).min(last);
    let lo = s.floor();
    let i0 = lo as usize;
    (i0, (i0 + 1).min(n - 1), s - lo)
}

/// `rife.Warp`: bilinear backward warp. out(c, y, x) samples `image` channel c at
/// (x + flow(0, y, x), y + flow(1, y, x)), the point clamped into the image first: this is
/// PyTorch's `grid_sample(bilinear, padding_mode="border", align_corners=True)` on `grid = pixel
/// + flow`, which RIFE's `warp()` uses, and what rife-ncnn-vulkan's Vulkan `Warp` computes (it
/// clamps both taps instead of the point: equal values, but its weights can leave [0, 1] far
/// outside the image, which costs float precision there; clamping the point does not).
pub fn warp(image: &Tensor, flow: &Tensor) -> Result<Tensor> {
    check_warp_args(image, flow)?;
    let (h, w) = (image.h, image.w);
    let mut out = Tensor::zeros(image.c, h, w);
    for y in 0..h {
        for x in 0..w {
            let (x0, x1, a) = warp_taps(x, flow.at(0, y, x), w);
            let (y0, y1, b) = warp_taps(y, flow.at(1, y, x), h);
            for c in 0..image.c {
                let top = image.at(c, y0, x0) * (1.0 - a) + image.at(c, y0, x1) * a;
                let bot = image.at(c, y1, x0) * (1.0 - a) + image.at(c, y1, x1) * a;
                out.data[(c * h + y) * w + x] = top * (1.0 - b) + bot * b;
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// layers and graphs

fn one<'a>(layer: &Layer, xs: &[&'a Tensor]) -> Result<&'a Tensor> {
    match xs.first() {
        Some(x) => Ok(x),
        None => bail!(Code::ModelInvalid, "layer {} has no input", layer.name),
    }
}

/// Run one layer on its input blobs; returns one tensor per top.
pub fn forward_layer(layer: &Layer, xs: &[&Tensor]) -> Result<Vec<Tensor>> {
    let out = match &layer.op {
        Op::Input { .. } => bail!(Code::InvalidArgument, "input blob of layer {} was not provided", layer.name),
        Op::Conv(c) => conv(c, one(layer, xs)?)?,
        Op::Deconv(c) => deconv(c, one(layer, xs)?)?,
        Op::InnerProduct { num_output, num_input, weight, bias, activation } => {
            inner_product(*num_output, *num_input, weight, bias.as_deref(), *activation, one(layer, xs)?)?
        }
        Op::ReLU { slope } => relu(one(layer, xs)?, *slope),
        Op::PReLU { slope } => prelu(one(layer, xs)?, slope)?,
        Op::Sigmoid => sigmoid(one(layer, xs)?),
        Op::TanH => tanh(one(layer, xs)?),
        Op::Clip { min, max } => clip(one(layer, xs)?, *min, *max),
        Op::ChannelAffine { scale, bias } => channel_affine(one(layer, xs)?, scale, bias)?,
        Op::PixelShuffle { factor, mode } => pixel_shuffle(one(layer, xs)?, *factor, *mode)?,
        Op::Interp(p) => interp(p, one(layer, xs)?)?,
        Op::BinaryOp { op, scalar: Some(s) } => binary_with_scalar(*op, one(layer, xs)?, *s),
        Op::BinaryOp { op, scalar: None } => {
            if xs.len() != 2 {
                bail!(Code::ModelInvalid, "BinaryOp {} needs two inputs", layer.name);
            }
            binary(*op, xs[0], xs[1])?
        }
        Op::Eltwise { op, coeffs } => eltwise(*op, coeffs, xs)?,
        Op::Concat { axis } => concat(*axis, xs)?,
        Op::Split => {
            let x = one(layer, xs)?;
            return Ok(layer.tops.iter().map(|_| x.clone()).collect());
        }
        Op::Crop(p) => crop(p, one(layer, xs)?, xs.get(1).copied())?,
        Op::Pooling(p) => pooling(p, one(layer, xs)?)?,
        Op::Permute { order_type } => permute(one(layer, xs)?, *order_type)?,
        Op::Reshape { w, h, c } => reshape(one(layer, xs)?, *w, *h, *c)?,
        Op::Flatten => flatten(one(layer, xs)?),
        Op::Softmax { axis } => softmax(one(layer, xs)?, *axis)?,
        Op::Noop => one(layer, xs)?.clone(),
        Op::Warp => {
            if xs.len() != 2 {
                bail!(Code::ModelInvalid, "Warp {} needs an image and a flow", layer.name);
            }
            warp(xs[0], xs[1])?
        }
        Op::Custom { kind, .. } => bail!(Code::ModelInvalid, "layer {}: custom layer type '{kind}' is not implemented", layer.name),
    };
    if layer.tops.len() != 1 {
        bail!(Code::ModelInvalid, "layer {} has {} outputs, expected 1", layer.name, layer.tops.len());
    }
    Ok(vec![out])
}

/// For each blob, the index of the last layer that reads it (None = never read).
pub fn last_uses(net: &Net) -> Vec<Option<usize>> {
    let mut last = vec![None; net.blob_names.len()];
    for (li, l) in net.layers.iter().enumerate() {
        for &b in &l.bottoms {
            last[b] = Some(li);
        }
    }
    last
}

/// Validates a run's arguments (shared by every executor): requested blobs exist, input blobs exist
/// and their tensors are well formed.
pub fn check_run_args<'a>(net: &Net, inputs: impl IntoIterator<Item = (usize, &'a Tensor)>, outputs: &[usize]) -> Result<()> {
    let nb = net.blob_names.len();
    for &o in outputs {
        if o >= nb {
            bail!(Code::InvalidArgument, "output blob {o} does not exist");
        }
    }
    for (b, t) in inputs {
        if b >= nb {
            bail!(Code::InvalidArgument, "input blob {b} does not exist");
        }
        check_tensor(t)?;
    }
    Ok(())
}

/// Execute a network: `inputs` are (blob index, tensor) pairs for its Input blobs; returns the
/// requested blobs in order. Blobs are freed after their last reader unless requested.
pub fn run_net(net: &Net, inputs: &[(usize, Tensor)], outputs: &[usize]) -> Result<Vec<Tensor>> {
    let nb = net.blob_names.len();
    check_run_args(net, inputs.iter().map(|(b, t)| (*b, t)), outputs)?;
    let mut blobs: Vec<Option<Tensor>> = vec![None; nb];
    for (b, t) in inputs {
        blobs[*b] = Some(t.clone());
    }
    let mut keep = vec![false; nb];
    for &o in outputs {
        keep[o] = true;
    }
    let last = last_uses(net);
    // Only run layers the requested outputs depend on.
    let mut needed = keep.clone();
    let mut run = vec![false; net.layers.len()];
    for (li, l) in net.layers.iter().enumerate().rev() {
        if l.tops.iter().any(|&t| needed[t]) {
            run[li] = true;
            for &b in &l.bottoms {
                needed[b] = true;
            }
        }
    }
    for (li, l) in net.layers.iter().enumerate() {
        if !run[li] {
            continue;
        }
        if matches!(l.op, Op::Input { .. }) {
            for &t in &l.tops {
                if blobs[t].is_none() {
                    bail!(Code::InvalidArgument, "input blob '{}' was not provided", net.blob_names[t]);
                }
            }
            continue;
        }
        let outs = {
            let mut xs = Vec::with_capacity(l.bottoms.len());
            for &b in &l.bottoms {
                match &blobs[b] {
                    Some(t) => xs.push(t),
                    None => bail!(Code::InvalidArgument, "blob '{}' is not available to layer {}", net.blob_names[b], l.name),
                }
            }
            forward_layer(l, &xs).map_err(|e| Error::new(e.code, format!("layer {} ({}): {}", l.name, l.kind, e.message)))?
        };
        for (&t, o) in l.tops.iter().zip(outs) {
            blobs[t] = Some(o);
        }
        for &b in &l.bottoms {
            if last[b] == Some(li) && !keep[b] {
                blobs[b] = None;
            }
        }
    }
    outputs
        .iter()
        .map(|&o| blobs[o].clone().ok_or_else(|| Error::new(Code::InvalidArgument, format!("blob {} was not computed", net.blob_names[o]))))
        .collect()
}
