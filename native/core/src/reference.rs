//! The plain CPU reference: a naive, single-threaded implementation of every [`Op`], following
//! ncnn's semantics. It is the ground truth the fast backends are tested against, so every function
//! here favours being obviously correct over being fast: one plain function per op. Over 500 lines on
//! purpose: the element-wise, convolution and graph-running ground truth in one place; the resampling
//! and layout ops are in [`layout`], the transformer ops in [`attention`] and [`overlap`] (re-exported here, so every op is `reference::NAME`).
//!
//! Shape conventions follow ncnn: a 3-D blob is (c, h, w), a 2-D blob (h, w), a 1-D blob (w).
//! "Axis" numbering is ncnn's: for a 3-D blob axis 0 = c, 1 = h, 2 = w; negative axes count from
//! the end. Shape errors that depend on the input give `invalid_argument`; layer descriptions this
//! module cannot execute give `model_invalid`.

use crate::bail;
use crate::error::{Code, Error, Result};
use crate::ncnn::model::{
    Activation, BinaryOpKind, Conv, Crop, EltwiseKind, Interp, Layer, Net, Op, Padding, PoolKind, Pooling,
};
use crate::tensor::Tensor;

mod attention;
mod layout;
mod overlap;
pub use attention::*;
pub use layout::*;
pub use overlap::*;

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
    if x.dims != 3 || r == 0 || !x.c.is_multiple_of(r * r) {
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
/// PyTorch's `grid_sample(bilinear, padding_mode="border", align_corners=True)` on
/// `grid = pixel + flow`, which RIFE's `warp()` uses, and what rife-ncnn-vulkan's Vulkan `Warp` computes (it
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
        Op::LayerNorm { weight, bias, eps } => layer_norm(one(layer, xs)?, weight, bias, *eps)?,
        Op::Gelu => gelu(one(layer, xs)?),
        Op::PadToMultiple { multiple } => pad_to_multiple(one(layer, xs)?, *multiple)?,
        Op::WindowAttention(p) => window_attention(p, one(layer, xs)?)?,
        Op::ChannelAttention { heads, temperature } => channel_attention(*heads, temperature, one(layer, xs)?)?,
        Op::OverlapAttention(p) => overlap_attention(p, one(layer, xs)?)?,
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
