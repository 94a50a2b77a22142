//! The ONNX layout ops (see ops.rs for the value model): Pad, Slice, SpaceToDepth, and the
//! Reshape -> Transpose -> Reshape triples that are pixel shuffles and unshuffles.

use super::consts;
use super::node::{attr_f, attr_i, attr_ints, attr_s, emit, input, need, need_blob, need_const, opt_const, set};
use super::proto::NodeProto;
use super::{Builder, Value};
use lucent_core::ncnn::model::{Activation, Conv, Crop, Op, Padding};
use lucent_core::{bail, Code, Result};

pub(super) fn pad(b: &mut Builder, n: &NodeProto) -> Result<()> {
    let (x, shape, _) = need_blob(b, n, 0)?;
    let mode = attr_s(n, "mode", "constant");
    let (pads, value) = if b.opset < 11 {
        (attr_ints(n, "pads").unwrap_or_default(), attr_f(n, "value", 0.0))
    } else {
        let p = need_const(b, n, 1, "pads")?.i64s();
        let v = opt_const(b, n, 2, "constant value")?.map(|c| c.data.first().copied().unwrap_or(0.0) as f32).unwrap_or(0.0);
        if input(b, n, 3)?.is_some() {
            bail!(Code::ModelInvalid, "Pad with axes is not supported");
        }
        (p, v)
    };
    // (n, c, h, w) begins then ends.
    let [n0, c0, t, l, n1, c1, bo, r] = pads[..] else {
        bail!(Code::ModelInvalid, "Pad of {} values: a 4-D image takes 8", pads.len());
    };
    if n0 != 0 || c0 != 0 || n1 != 0 || c1 != 0 || [t, l, bo, r].iter().any(|&p| !(0..=1024).contains(&p)) {
        bail!(Code::ModelInvalid, "Pad {pads:?}: only non-negative height and width pads are supported");
    }
    if mode != "constant" {
        bail!(Code::ModelInvalid, "Pad mode '{mode}' is not supported");
    }
    let pads = [t as usize, l as usize, bo as usize, r as usize];
    if pads == [0; 4] {
        return set(b, n, Value::Blob { b: x, shape, layer: None });
    }
    let out = n.output.first().cloned().unwrap_or_default();
    let only_convs = b.readers.get(&out).is_some_and(|r| r.iter().all(|k| k == "Conv")) && b.uses(&out) == b.readers.get(&out).map_or(0, |r| r.len());
    if !only_convs {
        // Read by something else (or a graph output): the padding itself, as a depthwise 1x1
        // convolution of weight 1 whose border is the pad value (exact).
        let c = shape[0];
        let conv = Conv {
            num_output: c,
            num_input: c,
            group: c,
            kernel_w: 1,
            kernel_h: 1,
            dilation_w: 1,
            dilation_h: 1,
            stride_w: 1,
            stride_h: 1,
            pad: Padding::Explicit { left: pads[1], right: pads[3], top: pads[0], bottom: pads[2] },
            pad_value: value,
            output_pad_right: 0,
            output_pad_bottom: 0,
            output_w: 0,
            output_h: 0,
            weight: vec![1.0; c],
            bias: None,
            activation: Activation::None,
        };
        let kind = if c > 1 { "ConvolutionDepthWise" } else { "Convolution" };
        return emit(b, n, kind, Op::Conv(conv), &[x], [c, shape[1] + pads[0] + pads[2], shape[2] + pads[1] + pads[3]]);
    }
    set(b, n, Value::Padded { b: x, shape: [shape[0], shape[1] + pads[0] + pads[2], shape[2] + pads[1] + pads[3]], pads, value })
}

pub(super) fn slice(b: &mut Builder, n: &NodeProto) -> Result<()> {
    let (x, shape, _) = need_blob(b, n, 0)?;
    let (starts, ends, axes, steps) = if b.opset < 10 {
        (attr_ints(n, "starts").unwrap_or_default(), attr_ints(n, "ends").unwrap_or_default(), attr_ints(n, "axes"), None)
    } else {
        (need_const(b, n, 1, "starts")?.i64s(), need_const(b, n, 2, "ends")?.i64s(), opt_const(b, n, 3, "axes")?.map(|a| a.i64s()), opt_const(b, n, 4, "steps")?.map(|s| s.i64s()))
    };
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    if starts.len() != axes.len() || ends.len() != axes.len() || steps.as_ref().is_some_and(|s| s.len() != axes.len() || s.iter().any(|&v| v != 1)) {
        bail!(Code::ModelInvalid, "Slice with steps other than 1 or mismatched starts/ends/axes is not supported");
    }
    let mut out = shape;
    let mut crop = Crop { woffset: 0, hoffset: 0, coffset: 0, outw: 0, outh: 0, outc: 0, woffset2: 0, hoffset2: 0, coffset2: 0, starts: vec![], ends: vec![], axes: vec![] };
    for i in 0..axes.len() {
        let ax = consts::norm_axis(axes[i], 4, "Slice")?;
        if ax == 0 {
            if consts::slice_bounds(starts[i], ends[i], 1) != (0, 1) {
                bail!(Code::ModelInvalid, "Slice of the batch");
            }
            continue;
        }
        if ax >= 2 && b.dynamic {
            bail!(Code::ModelInvalid, "Slice of the height or width of an input whose size is free");
        }
        let (s, e) = consts::slice_bounds(starts[i], ends[i], shape[ax - 1]);
        if s >= e {
            bail!(Code::ModelInvalid, "Slice to an empty range");
        }
        out[ax - 1] = e - s;
        crop.starts.push(s as i32);
        crop.ends.push(e as i32);
        crop.axes.push(ax as i32 - 1);
    }
    if crop.axes.is_empty() {
        return set(b, n, Value::Blob { b: x, shape, layer: None });
    }
    emit(b, n, "Crop", Op::Crop(crop), &[x], out)
}

/// SpaceToDepth (DCR: output channel `(dy·r + dx)·C + c` holds input pixel (r·y + dy, r·x + dx)
/// of channel c) as a stride-r convolution with one-hot weights (exact). Input sides must be
/// multiples of r (the description's `size_multiple`).
pub(super) fn space_to_depth(b: &mut Builder, n: &NodeProto) -> Result<()> {
    let (x, shape, _) = need_blob(b, n, 0)?;
    let r = attr_i(n, "blocksize", 0);
    let c = shape[0];
    if !(2..=8).contains(&r) || c * (r * r) as usize > 4096 {
        bail!(Code::ModelInvalid, "SpaceToDepth by {r} of {c} channels");
    }
    let r = r as usize;
    if shape[1] % r != 0 || shape[2] % r != 0 {
        bail!(Code::ModelInvalid, "SpaceToDepth by {r} of a {}x{} input", shape[2], shape[1]);
    }
    one_hot_conv(b, n, x, shape, r, |ci, dy, dx| (dy * r + dx) * c + ci)
}

/// A stride-r convolution with one-hot weights taking input pixel (r·y + dy, r·x + dx) of channel
/// `ci` to output channel `oc(ci, dy, dx)` (exact): SpaceToDepth and pixel unshuffle, which differ
/// only in the channel order. Input sides must be multiples of r (the description's `size_multiple`).
fn one_hot_conv(b: &mut Builder, n: &NodeProto, x: usize, shape: [usize; 3], r: usize, oc: impl Fn(usize, usize, usize) -> usize) -> Result<()> {
    let c = shape[0];
    let o = c * r * r;
    let mut w = vec![0f32; o * c * r * r];
    for ci in 0..c {
        for dy in 0..r {
            for dx in 0..r {
                w[((oc(ci, dy, dx) * c + ci) * r + dy) * r + dx] = 1.0;
            }
        }
    }
    b.size_multiple = b.size_multiple.max(1) * r / gcd(b.size_multiple.max(1), r);
    let conv = Conv {
        num_output: o,
        num_input: c,
        group: 1,
        kernel_w: r,
        kernel_h: r,
        dilation_w: 1,
        dilation_h: 1,
        stride_w: r,
        stride_h: r,
        pad: Padding::Explicit { left: 0, right: 0, top: 0, bottom: 0 },
        pad_value: 0.0,
        output_pad_right: 0,
        output_pad_bottom: 0,
        output_w: 0,
        output_h: 0,
        weight: w,
        bias: None,
        activation: Activation::None,
    };
    emit(b, n, "Convolution", Op::Conv(conv), &[x], [o, shape[1] / r, shape[2] / r])
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Reshape (and Flatten): to the same shape (nothing), to a 6-D view (the first half of a pixel
/// shuffle or unshuffle), or from a transposed 6-D view back to 4-D, which is matched against the
/// three layouts exporters write: pixel_unshuffle (`[1,C,H/r,r,W/r,r]`, perm `[0,1,3,5,2,4]`),
/// pixel_shuffle (`[1,C,r,r,H,W]`, perm `[0,1,4,2,5,3]`) and DepthToSpace DCR (`[1,r,r,C,H,W]`,
/// perm `[0,3,4,1,5,2]`).
pub(super) fn reshape(b: &mut Builder, n: &NodeProto, op: &str) -> Result<()> {
    let v = need(b, n, 0)?.clone();
    let cur: Vec<usize> = match &v {
        Value::Blob { shape, .. } => [1].into_iter().chain(shape.iter().copied()).collect(),
        Value::View { dims, perm: Some(p), .. } => p.iter().map(|&i| dims[i]).collect(),
        _ => bail!(Code::ModelInvalid, "{op} of this value is not supported"),
    };
    // On a free size a reshape's numbers are the nominal size's: have `load` map it again.
    b.shape_used |= b.dynamic;
    let total: usize = cur.iter().product();
    let target: Vec<usize> = if op == "Flatten" {
        let ax = consts::norm_axis(attr_i(n, "axis", 1), cur.len() + 1, "Flatten")?;
        vec![cur[..ax].iter().product(), cur[ax..].iter().product()]
    } else {
        let t = need_const(b, n, 1, "shape")?.i64s();
        let mut dims = Vec::with_capacity(t.len());
        let mut infer = None;
        for (i, &d) in t.iter().enumerate() {
            match d {
                0 if attr_i(n, "allowzero", 0) == 0 => dims.push(*cur.get(i).unwrap_or(&0)),
                -1 if infer.is_none() => {
                    infer = Some(i);
                    dims.push(1);
                }
                d if d > 0 => dims.push(d as usize),
                _ => bail!(Code::ModelInvalid, "Reshape to {t:?}"),
            }
        }
        if let Some(i) = infer {
            let known: usize = dims.iter().product();
            if known == 0 || !total.is_multiple_of(known) {
                bail!(Code::ModelInvalid, "Reshape to {t:?} of {total} values");
            }
            dims[i] = total / known;
        }
        dims
    };
    if target.iter().product::<usize>() != total {
        bail!(Code::ModelInvalid, "Reshape of {cur:?} to {target:?}");
    }
    if target == cur {
        return set(b, n, v);
    }
    match v {
        Value::Blob { b: x, shape, .. } if target.len() == 6 && target[0] == 1 => set(b, n, Value::View { b: x, shape, dims: target, perm: None }),
        Value::View { b: x, shape, dims, perm: Some(p) } if target.len() == 4 && target[0] == 1 => {
            let (c, h, w) = (shape[0], shape[1], shape[2]);
            let d = &dims;
            if p == [0, 1, 3, 5, 2, 4] && d[1] == c && d[3] == d[5] && d[2] * d[3] == h && d[4] * d[5] == w && target == [1, c * d[3] * d[3], d[2], d[4]] {
                let r = d[3];
                if !(2..=8).contains(&r) {
                    bail!(Code::ModelInvalid, "pixel unshuffle by {r}");
                }
                return unshuffle(b, n, x, shape, r);
            }
            let shuffle = |mode: i32, r: usize| Op::PixelShuffle { factor: r, mode };
            if p == [0, 1, 4, 2, 5, 3] && d[2] == d[3] && d[1] * d[2] * d[3] == c && d[4] == h && d[5] == w && target == [1, d[1], h * d[2], w * d[2]] {
                return emit(b, n, "PixelShuffle", shuffle(0, d[2]), &[x], [d[1], h * d[2], w * d[2]]);
            }
            if p == [0, 3, 4, 1, 5, 2] && d[1] == d[2] && d[1] * d[2] * d[3] == c && d[4] == h && d[5] == w && target == [1, d[3], h * d[1], w * d[1]] {
                return emit(b, n, "PixelShuffle", shuffle(1, d[1]), &[x], [d[3], h * d[1], w * d[1]]);
            }
            bail!(Code::ModelInvalid, "Reshape / Transpose {dims:?} by {p:?} to {target:?} is no pixel shuffle or unshuffle")
        }
        _ => bail!(Code::ModelInvalid, "Reshape of {cur:?} to {target:?} is not supported (only pixel shuffle / unshuffle patterns)"),
    }
}

/// PyTorch's pixel_unshuffle by `r`: output channel `c·r² + dy·r + dx` holds input pixel
/// (r·y + dy, r·x + dx) of channel c; a stride-r convolution with one-hot weights (exact).
fn unshuffle(b: &mut Builder, n: &NodeProto, x: usize, shape: [usize; 3], r: usize) -> Result<()> {
    let c = shape[0];
    let o = c * r * r;
    if o > 4096 {
        bail!(Code::ModelInvalid, "pixel unshuffle to {o} channels");
    }
    one_hot_conv(b, n, x, shape, r, |ci, dy, dx| ci * r * r + dy * r + dx)
}
