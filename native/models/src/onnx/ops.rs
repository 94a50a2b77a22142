//! One ONNX node at a time onto Lucent's ops (see the module above for the value model).
//!
//! Over 500 lines on purpose: one `match` over the op names, each arm a few lines, reads better in one place than
//! split by op family.
//!
//! Runtime ops taken: Conv (groups, dilation, strides, explicit or auto pads), ConvTranspose
//! (groups, strides, pads, output_padding), BatchNormalization (folded into the convolution before
//! it, else a per-channel affine), Relu, LeakyRelu, PRelu, Sigmoid, Tanh, Clip (fused into the
//! convolution before them where possible), Add / Sub / Mul / Div (blob with blob, with a scalar, or
//! with a per-channel constant), Pow by a scalar, Concat (channels, height or width), MaxPool and
//! AveragePool (ceil_mode, pads), GlobalAveragePool / GlobalMaxPool, Resize / Upsample (nearest:
//! asymmetric + floor at any scale, or any rounding at whole scales; linear: half_pixel,
//! pytorch_half_pixel, align_corners; cubic with A = -0.75 likewise), DepthToSpace (DCR and CRD),
//! SpaceToDepth (a one-hot strided convolution), Gelu (exact), HardSigmoid, HardSwish, Sqrt, Neg,
//! Reciprocal, Max / Min (with a scalar or of two images), Pad (constant: folded into the
//! convolutions that read it, else a depthwise 1x1 convolution that pads), Reshape / Transpose /
//! Flatten where they make a pixel shuffle or unshuffle, Slice (steps of 1; channels always,
//! height and width on a static input) (the layout ops are in layout.rs), Identity, Dropout, and
//! Cast to a float type.
//! Constant ops folded: Constant, Shape, Gather, Unsqueeze, Squeeze, Concat, Slice, Cast, Add,
//! Sub, Mul, Div, Floor, Ceil, Neg, Sqrt, ConstantOfShape.

use super::consts::{self, Const};
use super::node::{attr, attr_f, attr_i, attr_ints, attr_s, emit, need, need_blob, need_const, node_name, opt_const, set};
use super::proto::NodeProto;
use super::{layout, Builder, Value};
use lucent_core::ncnn::model::{Activation, BinaryOpKind, Conv, EltwiseKind, Interp, Op, Padding, PoolKind, Pooling};
use lucent_core::{bail, Code, Result};

/// Whether the node's first input is a convolution result nothing else reads, so the node may be
/// fused into it: returns the layer index.
fn fusable_conv(b: &Builder, n: &NodeProto) -> Option<usize> {
    let name = n.input.first()?;
    let Some(Value::Blob { layer: Some(li), .. }) = b.values.get(name) else { return None };
    let ok = b.uses(name) == 1 && matches!(&b.layers[*li].op, Op::Conv(c) if c.activation == Activation::None);
    ok.then_some(*li)
}

pub(crate) fn map_node(b: &mut Builder, n: &NodeProto) -> Result<()> {
    let op = n.op_type.as_deref().unwrap_or("");
    if n.domain.as_deref().is_some_and(|d| !d.is_empty() && d != "ai.onnx") {
        bail!(Code::ModelInvalid, "op '{op}' of domain '{}' is not supported", n.domain.as_deref().unwrap_or(""));
    }
    if n.output.len() > 1 && !matches!(op, "Dropout") {
        bail!(Code::ModelInvalid, "op '{op}' with {} outputs is not supported", n.output.len());
    }
    // Constant folding first: a node whose inputs are all constants.
    let all_const = !n.input.is_empty() && n.input.iter().filter(|i| !i.is_empty()).all(|i| matches!(b.values.get(i), Some(Value::Const(_))));
    match op {
        "Constant" => {
            let c = constant(b, n)?;
            return set(b, n, Value::Const(c));
        }
        "Shape" => {
            let v = need(b, n, 0)?.clone();
            let dims: Vec<f64> = match v {
                Value::Blob { shape, .. } | Value::Padded { shape, .. } => {
                    // On a free size the numbers are the nominal size's: the graph is mapped
                    // again at another size and must come out the same (see `load`).
                    b.shape_used |= b.dynamic;
                    let mut d = vec![1.0];
                    d.extend(shape.iter().map(|&s| s as f64));
                    d
                }
                Value::Const(c) => c.dims.iter().map(|&d| d as f64).collect(),
                Value::View { .. } => bail!(Code::ModelInvalid, "Shape of a reshaped image is not supported"),
            };
            let r = dims.len() as i64;
            let norm = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
            let (s, e) = (norm(attr_i(n, "start", 0)), norm(attr_i(n, "end", r)));
            return set(b, n, Value::Const(Const::vector(dims[s..e.max(s)].to_vec(), true)));
        }
        "ConstantOfShape" => {
            let shape = need_const(b, n, 0, "shape")?;
            let value = match attr(n, "value").and_then(|a| a.t.as_ref()) {
                Some(t) => Const::from_proto(t, &mut b.budget)?,
                None => Const::scalar(0.0, false),
            };
            return set(b, n, Value::Const(consts::constant_of_shape(&shape, &value)?));
        }
        _ if all_const => return fold(b, n, op),
        _ => {}
    }
    match op {
        "Identity" | "Dropout" => {
            let v = need(b, n, 0)?.clone();
            set(b, n, v)
        }
        "Cast" => {
            if consts::is_int_type(attr_i(n, "to", 1) as i32) != Some(false) {
                bail!(Code::ModelInvalid, "Cast of an image to an integer type is not supported");
            }
            let v = need(b, n, 0)?.clone();
            set(b, n, v)
        }
        "Conv" => conv(b, n),
        "ConvTranspose" => conv_transpose(b, n),
        "BatchNormalization" => batch_norm(b, n),
        "Relu" => activation(b, n, Activation::Relu, Op::ReLU { slope: 0.0 }, "ReLU"),
        "LeakyRelu" => {
            let s = attr_f(n, "alpha", 0.01);
            activation(b, n, Activation::LeakyRelu(s), Op::ReLU { slope: s }, "ReLU")
        }
        "Sigmoid" => activation(b, n, Activation::Sigmoid, Op::Sigmoid, "Sigmoid"),
        "Tanh" => {
            let (x, shape, _) = need_blob(b, n, 0)?;
            emit(b, n, "TanH", Op::TanH, &[x], shape)
        }
        "Clip" => {
            let (lo, hi) = if b.opset < 11 {
                (attr_f(n, "min", f32::MIN), attr_f(n, "max", f32::MAX))
            } else {
                let lo = opt_const(b, n, 1, "minimum")?.and_then(|c| c.f32s().first().copied()).unwrap_or(f32::MIN);
                let hi = opt_const(b, n, 2, "maximum")?.and_then(|c| c.f32s().first().copied()).unwrap_or(f32::MAX);
                (lo, hi)
            };
            activation(b, n, Activation::Clip(lo, hi), Op::Clip { min: lo, max: hi }, "Clip")
        }
        "PRelu" => {
            let (x, shape, _) = need_blob(b, n, 0)?;
            let slope = need_const(b, n, 1, "slope")?;
            if slope.numel() != 1 && slope.numel() != shape[0] {
                bail!(Code::ModelInvalid, "PRelu slope of shape {:?} for {} channels: only one slope or one per channel is supported", slope.dims, shape[0]);
            }
            emit(b, n, "PReLU", Op::PReLU { slope: slope.f32s() }, &[x], shape)
        }
        "Add" | "Sub" | "Mul" | "Div" | "Pow" => arith(b, n, op),
        "Concat" => {
            let axis = attr_i(n, "axis", 1);
            let ax = consts::norm_axis(axis, 4, "Concat")?;
            if ax == 0 {
                bail!(Code::ModelInvalid, "Concat along the batch is not supported");
            }
            let mut xs = Vec::new();
            let mut shape = [0usize; 3];
            for i in 0..n.input.len() {
                let (x, s, _) = need_blob(b, n, i)?;
                if i == 0 {
                    shape = s;
                    shape[ax - 1] = 0;
                }
                if (0..3).any(|k| k != ax - 1 && s[k] != shape[k]) {
                    bail!(Code::ModelInvalid, "Concat inputs of shapes {shape:?} and {s:?} do not fit");
                }
                shape[ax - 1] += s[ax - 1];
                xs.push(x);
            }
            emit(b, n, "Concat", Op::Concat { axis: ax as i32 - 1 }, &xs, shape)
        }
        "MaxPool" | "AveragePool" => pool(b, n, op == "MaxPool"),
        "GlobalAveragePool" | "GlobalMaxPool" => {
            let (x, shape, _) = need_blob(b, n, 0)?;
            let kind = if op == "GlobalMaxPool" { PoolKind::Max } else { PoolKind::Avg };
            let p = Pooling { kind, global: true, kernel_w: 0, kernel_h: 0, stride_w: 1, stride_h: 1, pad_left: 0, pad_right: 0, pad_top: 0, pad_bottom: 0, pad_mode: 0, count_include_pad: false, adaptive: false, out_w: 0, out_h: 0 };
            let name = node_name(n);
            let v = b.add(&format!("{name}.pool"), "Pooling", Op::Pooling(p), &[x]);
            let top = b.add(&name, "Reshape", Op::Reshape { w: 1, h: 1, c: -1 }, &[v]);
            let layer = Some(b.layers.len() - 1);
            set(b, n, Value::Blob { b: top, shape: [shape[0], 1, 1], layer })
        }
        "Resize" | "Upsample" => resize(b, n, op),
        "DepthToSpace" => {
            let (x, shape, _) = need_blob(b, n, 0)?;
            let r = attr_i(n, "blocksize", 0);
            if !(1..=16).contains(&r) || shape[0] % (r * r) as usize != 0 {
                bail!(Code::ModelInvalid, "DepthToSpace of {} channels by {r}", shape[0]);
            }
            let r = r as usize;
            let mode = match attr_s(n, "mode", "DCR").as_str() {
                "DCR" => 1,
                "CRD" => 0,
                m => bail!(Code::ModelInvalid, "DepthToSpace mode '{m}'"),
            };
            emit(b, n, "PixelShuffle", Op::PixelShuffle { factor: r, mode }, &[x], [shape[0] / (r * r), shape[1] * r, shape[2] * r])
        }
        "Pad" => layout::pad(b, n),
        "SpaceToDepth" => layout::space_to_depth(b, n),
        "Reshape" | "Flatten" => layout::reshape(b, n, op),
        "Transpose" => {
            let perm: Vec<usize> = attr_ints(n, "perm").unwrap_or_default().iter().map(|&p| p.max(0) as usize).collect();
            match need(b, n, 0)?.clone() {
                Value::View { b: x, shape, dims, perm: None } if perm.len() == dims.len() && {
                    let mut p = perm.clone();
                    p.sort_unstable();
                    p == (0..dims.len()).collect::<Vec<_>>()
                } => set(b, n, Value::View { b: x, shape, dims, perm: Some(perm) }),
                _ => bail!(Code::ModelInvalid, "Transpose is only supported inside a pixel shuffle or unshuffle (Reshape, Transpose, Reshape)"),
            }
        }
        "Gelu" => {
            if attr_s(n, "approximate", "none") != "none" {
                bail!(Code::ModelInvalid, "Gelu with the tanh approximation is not supported");
            }
            let (x, shape, _) = need_blob(b, n, 0)?;
            emit(b, n, "GELU", Op::Gelu, &[x], shape)
        }
        "HardSigmoid" | "HardSwish" => {
            let (a, c) = if op == "HardSwish" { (1.0 / 6.0, 0.5) } else { (attr_f(n, "alpha", 0.2), attr_f(n, "beta", 0.5)) };
            if op == "HardSwish" && fusable_conv(b, n).is_some() {
                return activation(b, n, Activation::HardSwish(a, c), Op::Noop, "Noop");
            }
            let (x, shape, _) = need_blob(b, n, 0)?;
            let name = node_name(n);
            let t = b.add(&format!("{name}.mul"), "BinaryOp", Op::BinaryOp { op: BinaryOpKind::Mul, scalar: Some(a) }, &[x]);
            let t = b.add(&format!("{name}.add"), "BinaryOp", Op::BinaryOp { op: BinaryOpKind::Add, scalar: Some(c) }, &[t]);
            if op == "HardSigmoid" {
                return emit(b, n, "Clip", Op::Clip { min: 0.0, max: 1.0 }, &[t], shape);
            }
            let t = b.add(&format!("{name}.clip"), "Clip", Op::Clip { min: 0.0, max: 1.0 }, &[t]);
            emit(b, n, "Eltwise", Op::Eltwise { op: EltwiseKind::Prod, coeffs: vec![] }, &[x, t], shape)
        }
        "Sqrt" | "Neg" | "Reciprocal" => {
            let (x, shape, _) = need_blob(b, n, 0)?;
            let (kind, v) = match op {
                "Sqrt" => (BinaryOpKind::Pow, 0.5),
                "Neg" => (BinaryOpKind::Mul, -1.0),
                _ => (BinaryOpKind::RDiv, 1.0),
            };
            emit(b, n, "BinaryOp", Op::BinaryOp { op: kind, scalar: Some(v) }, &[x], shape)
        }
        "Max" | "Min" if n.input.len() == 2 => {
            let kind = if op == "Max" { BinaryOpKind::Max } else { BinaryOpKind::Min };
            match (need(b, n, 0)?.clone(), need(b, n, 1)?.clone()) {
                (Value::Blob { b: x, shape, .. }, Value::Const(k)) | (Value::Const(k), Value::Blob { b: x, shape, .. }) if k.numel() == 1 => {
                    emit(b, n, "BinaryOp", Op::BinaryOp { op: kind, scalar: Some(k.data[0] as f32) }, &[x], shape)
                }
                (Value::Blob { b: x, shape: s0, .. }, Value::Blob { b: y, shape: s1, .. }) if s0 == s1 => {
                    emit(b, n, "BinaryOp", Op::BinaryOp { op: kind, scalar: None }, &[x, y], s0)
                }
                _ => bail!(Code::ModelInvalid, "{op} of these operands is not supported (a scalar constant or two images of one shape)"),
            }
        }
        "Slice" => layout::slice(b, n),
        _ => bail!(Code::ModelInvalid, "op '{op}' is not supported"),
    }
}

/// A `Constant` node's value.
fn constant(b: &mut Builder, n: &NodeProto) -> Result<Const> {
    if let Some(t) = attr(n, "value").and_then(|a| a.t.as_ref()) {
        return Const::from_proto(t, &mut b.budget);
    }
    if let Some(a) = attr(n, "value_float").and_then(|a| a.f) {
        return Ok(Const::scalar(a as f64, false));
    }
    if let Some(a) = attr(n, "value_int").and_then(|a| a.i) {
        return Ok(Const::scalar(a as f64, true));
    }
    if let Some(a) = attr(n, "value_floats") {
        return Ok(Const::vector(a.floats.iter().map(|&v| v as f64).collect(), false));
    }
    if let Some(a) = attr(n, "value_ints") {
        return Ok(Const::vector(a.ints.iter().map(|&v| v as f64).collect(), true));
    }
    bail!(Code::ModelInvalid, "Constant without a supported value (sparse and string constants are not)")
}

/// A node whose inputs are all constants.
fn fold(b: &mut Builder, n: &NodeProto, op: &str) -> Result<()> {
    let c = |i: usize| need_const(b, n, i, "operand");
    let out = match op {
        "Identity" | "Dropout" => c(0)?,
        "Cast" => consts::cast(&c(0)?, attr_i(n, "to", 1) as i32)?,
        "Gather" => consts::gather(&c(0)?, &c(1)?, attr_i(n, "axis", 0))?,
        "Unsqueeze" | "Squeeze" => {
            let axes = if b.opset >= 13 { opt_const(b, n, 1, "axes")?.map(|a| a.i64s()).unwrap_or_default() } else { attr_ints(n, "axes").unwrap_or_default() };
            if op == "Unsqueeze" { consts::unsqueeze(&c(0)?, &axes)? } else { consts::squeeze(&c(0)?, &axes)? }
        }
        "Concat" => {
            let xs: Vec<Const> = (0..n.input.len()).map(c).collect::<Result<_>>()?;
            consts::concat(&xs.iter().collect::<Vec<_>>(), attr_i(n, "axis", 0))?
        }
        "Slice" => {
            let x = c(0)?;
            let (starts, ends, axes, steps) = if b.opset < 10 {
                (attr_ints(n, "starts").unwrap_or_default(), attr_ints(n, "ends").unwrap_or_default(), attr_ints(n, "axes"), None)
            } else {
                (c(1)?.i64s(), c(2)?.i64s(), opt_const(b, n, 3, "axes")?.map(|a| a.i64s()), opt_const(b, n, 4, "steps")?.map(|s| s.i64s()))
            };
            if starts.len() != 1 || ends.len() != 1 || axes.as_ref().is_some_and(|a| a != &[0] && a != &[-1]) {
                bail!(Code::ModelInvalid, "Slice of a constant along more than its one axis is not supported");
            }
            consts::slice_1d(&x, starts[0], ends[0], steps.and_then(|s| s.first().copied()).unwrap_or(1))?
        }
        "Add" | "Sub" | "Mul" | "Div" => consts::binary(op, &c(0)?, &c(1)?)?,
        "Floor" | "Ceil" | "Neg" | "Sqrt" => consts::unary(op, &c(0)?)?,
        _ => bail!(Code::ModelInvalid, "op '{op}' on constants is not supported"),
    };
    set(b, n, Value::Const(out))
}

/// Strides, dilations and explicit pads (top, left, bottom, right) of a 2-D window op.
/// (strides, dilations, pads, auto_pad) of a window op.
type Window = ([usize; 2], [usize; 2], Option<[usize; 4]>, String);

fn window(n: &NodeProto, what: &str) -> Result<Window> {
    let two = |name: &str| -> Result<[usize; 2]> {
        match attr_ints(n, name).as_deref() {
            None => Ok([1, 1]),
            Some(&[a, b2]) if (1..=64).contains(&a) && (1..=64).contains(&b2) => Ok([a as usize, b2 as usize]),
            Some(v) => bail!(Code::ModelInvalid, "{what} {name} {v:?} are not supported (2-D, 1 to 64)"),
        }
    };
    let pads = match attr_ints(n, "pads").as_deref() {
        None => None,
        Some(&[t, l, bo, r]) if [t, l, bo, r].iter().all(|&p| (0..=1024).contains(&p)) => Some([t as usize, l as usize, bo as usize, r as usize]),
        Some(v) => bail!(Code::ModelInvalid, "{what} pads {v:?} are not supported"),
    };
    Ok((two("strides")?, two("dilations")?, pads, attr_s(n, "auto_pad", "NOTSET")))
}

fn conv_padding(auto: &str, pads: Option<[usize; 4]>, what: &str) -> Result<Padding> {
    Ok(match auto {
        "NOTSET" | "" => {
            let [t, l, bo, r] = pads.unwrap_or([0; 4]);
            Padding::Explicit { left: l, right: r, top: t, bottom: bo }
        }
        "VALID" => Padding::Explicit { left: 0, right: 0, top: 0, bottom: 0 },
        "SAME_UPPER" => Padding::SameUpper,
        "SAME_LOWER" => Padding::SameLower,
        a => bail!(Code::ModelInvalid, "{what} auto_pad '{a}'"),
    })
}

fn conv(b: &mut Builder, n: &NodeProto) -> Result<()> {
    let (x, shape, extra, pad_value) = match need(b, n, 0)? {
        Value::Blob { b, shape, .. } => (*b, *shape, [0; 4], 0.0),
        // The padded blob's shape counts the pads, which the convolution now applies itself.
        Value::Padded { b, shape, pads, value } => (*b, [shape[0], shape[1] - pads[0] - pads[2], shape[2] - pads[1] - pads[3]], *pads, *value),
        Value::Const(_) => bail!(Code::ModelInvalid, "a convolution of a constant is not supported"),
        Value::View { .. } => bail!(Code::ModelInvalid, "a convolution of a reshaped image is not supported"),
    };
    let w = need_const(b, n, 1, "weight")?;
    let bias = opt_const(b, n, 2, "bias")?;
    let [o, ipg, kh, kw] = w.dims[..] else {
        bail!(Code::ModelInvalid, "a 2-D convolution weight has rank 4, this one {:?}", w.dims);
    };
    let group = attr_i(n, "group", 1);
    if group < 1 || o == 0 || ipg == 0 || kh == 0 || kw == 0 || kh > 64 || kw > 64 || o % group as usize != 0 || ipg * group as usize != shape[0] {
        bail!(Code::ModelInvalid, "weight {:?} with {group} groups does not fit an input of {} channels", w.dims, shape[0]);
    }
    if bias.as_ref().is_some_and(|c| c.numel() != o) {
        bail!(Code::ModelInvalid, "bias of {} values for {o} outputs", bias.as_ref().map(|c| c.numel()).unwrap_or(0));
    }
    let (strides, dil, pads, auto) = window(n, "Conv")?;
    let mut pad = conv_padding(&auto, pads, "Conv")?;
    if extra != [0; 4] {
        // A constant Pad before: added to the explicit pads; its value must agree with the conv's zeros.
        match pad {
            Padding::Explicit { left, right, top, bottom } if pad_value == 0.0 || (left, right, top, bottom) == (0, 0, 0, 0) => {
                pad = Padding::Explicit { left: left + extra[1], right: right + extra[3], top: top + extra[0], bottom: bottom + extra[2] };
            }
            _ => bail!(Code::ModelInvalid, "a Pad of value {pad_value} before a padded convolution is not supported"),
        }
    }
    let c = Conv {
        num_output: o,
        num_input: shape[0],
        group: group as usize,
        kernel_w: kw,
        kernel_h: kh,
        dilation_w: dil[1],
        dilation_h: dil[0],
        stride_w: strides[1],
        stride_h: strides[0],
        pad,
        pad_value,
        output_pad_right: 0,
        output_pad_bottom: 0,
        output_w: 0,
        output_h: 0,
        weight: w.f32s(),
        bias: bias.map(|c| c.f32s()),
        activation: Activation::None,
    };
    let g = lucent_core::reference::conv_geometry(&c, shape[2], shape[1]).map_err(|e| lucent_core::Error::new(Code::ModelInvalid, e.message))?;
    let kind = if c.group > 1 { "ConvolutionDepthWise" } else { "Convolution" };
    emit(b, n, kind, Op::Conv(c), &[x], [o, g.out_h, g.out_w])
}

fn conv_transpose(b: &mut Builder, n: &NodeProto) -> Result<()> {
    let (x, shape, _) = need_blob(b, n, 0)?;
    let w = need_const(b, n, 1, "weight")?;
    let bias = opt_const(b, n, 2, "bias")?;
    let [i, opg, kh, kw] = w.dims[..] else {
        bail!(Code::ModelInvalid, "a 2-D transposed convolution weight has rank 4, this one {:?}", w.dims);
    };
    let group = attr_i(n, "group", 1);
    if group < 1 || i != shape[0] || opg == 0 || kh == 0 || kw == 0 || kh > 64 || kw > 64 || i % group as usize != 0 {
        bail!(Code::ModelInvalid, "weight {:?} with {group} groups does not fit an input of {} channels", w.dims, shape[0]);
    }
    let g = group as usize;
    let (ipg, o) = (i / g, opg * g);
    if bias.as_ref().is_some_and(|c| c.numel() != o) {
        bail!(Code::ModelInvalid, "bias of {} values for {o} outputs", bias.as_ref().map(|c| c.numel()).unwrap_or(0));
    }
    if attr(n, "output_shape").is_some() {
        bail!(Code::ModelInvalid, "ConvTranspose with output_shape is not supported (give pads)");
    }
    let (strides, dil, pads, auto) = window(n, "ConvTranspose")?;
    if auto != "NOTSET" && !auto.is_empty() && auto != "VALID" {
        bail!(Code::ModelInvalid, "ConvTranspose auto_pad '{auto}' is not supported");
    }
    let pad = conv_padding(&auto, pads, "ConvTranspose")?;
    let op = match attr_ints(n, "output_padding").as_deref() {
        None => [0, 0],
        Some(&[a, c]) if (0..64).contains(&a) && (0..64).contains(&c) => [a as usize, c as usize],
        Some(v) => bail!(Code::ModelInvalid, "output_padding {v:?}"),
    };
    // ONNX (in, out/group, kh, kw) -> Lucent (out, in/group, kh, kw).
    let src = w.f32s();
    let k = kh * kw;
    let mut weight = vec![0f32; src.len()];
    for gi in 0..g {
        for ii in 0..ipg {
            for oo in 0..opg {
                let s = ((gi * ipg + ii) * opg + oo) * k;
                let d = ((gi * opg + oo) * ipg + ii) * k;
                weight[d..d + k].copy_from_slice(&src[s..s + k]);
            }
        }
    }
    let c = Conv {
        num_output: o,
        num_input: i,
        group: g,
        kernel_w: kw,
        kernel_h: kh,
        dilation_w: dil[1],
        dilation_h: dil[0],
        stride_w: strides[1],
        stride_h: strides[0],
        pad,
        pad_value: 0.0,
        output_pad_right: op[1],
        output_pad_bottom: op[0],
        output_w: 0,
        output_h: 0,
        weight,
        bias: bias.map(|c| c.f32s()),
        activation: Activation::None,
    };
    let (_, _, _, _, ow, oh) = lucent_core::reference::deconv_geometry(&c, shape[2], shape[1]).map_err(|e| lucent_core::Error::new(Code::ModelInvalid, e.message))?;
    let kind = if g > 1 { "DeconvolutionDepthWise" } else { "Deconvolution" };
    emit(b, n, kind, Op::Deconv(c), &[x], [o, oh, ow])
}

fn batch_norm(b: &mut Builder, n: &NodeProto) -> Result<()> {
    let (x, shape, _) = need_blob(b, n, 0)?;
    let [g, beta, mean, var] = [1, 2, 3, 4].map(|i| need_const(b, n, i, "statistics").map(|c| c.data));
    let (g, beta, mean, var) = (g?, beta?, mean?, var?);
    let ch = shape[0];
    if [g.len(), beta.len(), mean.len(), var.len()].iter().any(|&l| l != ch) {
        bail!(Code::ModelInvalid, "statistics do not fit {ch} channels");
    }
    let eps = attr_f(n, "epsilon", 1e-5) as f64;
    let scale: Vec<f64> = (0..ch).map(|k| g[k] / (var[k] + eps).sqrt()).collect();
    let shift: Vec<f64> = (0..ch).map(|k| beta[k] - mean[k] * scale[k]).collect();
    if let Some(li) = fusable_conv(b, n) {
        if let Op::Conv(c) = &mut b.layers[li].op {
            let per = c.weight.len() / ch.max(1);
            for (row, s) in c.weight.chunks_mut(per.max(1)).zip(&scale) {
                for v in row {
                    *v = (*v as f64 * s) as f32;
                }
            }
            let b0 = c.bias.clone().unwrap_or_else(|| vec![0.0; ch]);
            c.bias = Some((0..ch).map(|k| (b0[k] as f64 * scale[k] + shift[k]) as f32).collect());
        }
        let v = need(b, n, 0)?.clone();
        return set(b, n, v);
    }
    let op = Op::ChannelAffine { scale: scale.iter().map(|&v| v as f32).collect(), bias: shift.iter().map(|&v| v as f32).collect() };
    emit(b, n, "Scale", op, &[x], shape)
}

/// An activation: fused into the convolution before it when nothing else reads that, else a layer.
fn activation(b: &mut Builder, n: &NodeProto, act: Activation, op: Op, kind: &str) -> Result<()> {
    let (x, shape, _) = need_blob(b, n, 0)?;
    if let Some(li) = fusable_conv(b, n) {
        if let Op::Conv(c) = &mut b.layers[li].op {
            c.activation = act;
        }
        let v = need(b, n, 0)?.clone();
        return set(b, n, v);
    }
    emit(b, n, kind, op, &[x], shape)
}

/// Add / Sub / Mul / Div / Pow with a runtime operand.
fn arith(b: &mut Builder, n: &NodeProto, op: &str) -> Result<()> {
    let (a, c) = (need(b, n, 0)?.clone(), need(b, n, 1)?.clone());
    match (&a, &c) {
        (Value::Blob { b: xa, shape: sa, .. }, Value::Blob { b: xc, shape: sc, .. }) => {
            if op == "Pow" {
                bail!(Code::ModelInvalid, "Pow of two images is not supported");
            }
            let out = [sa[0].max(sc[0]), sa[1].max(sc[1]), sa[2].max(sc[2])];
            let fits = |s: &[usize; 3]| (0..3).all(|k| s[k] == out[k] || s[k] == 1);
            if !fits(sa) || !fits(sc) {
                bail!(Code::ModelInvalid, "operands of shapes {sa:?} and {sc:?} do not broadcast");
            }
            if sa == sc && (op == "Add" || op == "Mul") {
                let (kind, coeffs) = if op == "Add" { (EltwiseKind::Sum, vec![]) } else { (EltwiseKind::Prod, vec![]) };
                return emit(b, n, "Eltwise", Op::Eltwise { op: kind, coeffs }, &[*xa, *xc], out);
            }
            let kind = match op {
                "Add" => BinaryOpKind::Add,
                "Sub" => BinaryOpKind::Sub,
                "Mul" => BinaryOpKind::Mul,
                _ => BinaryOpKind::Div,
            };
            emit(b, n, "BinaryOp", Op::BinaryOp { op: kind, scalar: None }, &[*xa, *xc], out)
        }
        (Value::Blob { b: x, shape, .. }, Value::Const(k)) | (Value::Const(k), Value::Blob { b: x, shape, .. }) => {
            let blob_first = matches!(a, Value::Blob { .. });
            let (x, shape) = (*x, *shape);
            if k.numel() == 1 {
                let v = k.data[0] as f32;
                let kind = match (op, blob_first) {
                    ("Add", _) => BinaryOpKind::Add,
                    ("Mul", _) => BinaryOpKind::Mul,
                    ("Sub", true) => BinaryOpKind::Sub,
                    ("Sub", false) => BinaryOpKind::RSub,
                    ("Div", true) => BinaryOpKind::Div,
                    ("Div", false) => BinaryOpKind::RDiv,
                    ("Pow", true) => BinaryOpKind::Pow,
                    _ => bail!(Code::ModelInvalid, "a constant raised to an image's power is not supported"),
                };
                return emit(b, n, "BinaryOp", Op::BinaryOp { op: kind, scalar: Some(v) }, &[x], shape);
            }
            // Per channel: (c,1,1) or (1,c,1,1); numpy broadcasting puts a plain (c) on the width.
            let d = &k.dims;
            let per_channel = k.numel() == shape[0] && d.len() >= 3 && d[d.len() - 3] == shape[0] && d[d.len() - 2..] == [1, 1];
            if !per_channel || op == "Pow" {
                bail!(Code::ModelInvalid, "{op} with a constant of shape {:?} (an image of {} channels): only a scalar or one value per channel is supported", k.dims, shape[0]);
            }
            let v = k.f32s();
            let ones = vec![1.0f32; v.len()];
            let zeros = vec![0.0f32; v.len()];
            let (scale, bias) = match (op, blob_first) {
                ("Add", _) => (ones, v),
                ("Mul", _) => (v, zeros),
                ("Sub", true) => (ones, v.iter().map(|x| -x).collect()),
                ("Sub", false) => (vec![-1.0; v.len()], v),
                ("Div", true) => (v.iter().map(|x| 1.0 / x).collect(), zeros),
                _ => bail!(Code::ModelInvalid, "a per-channel constant divided by an image is not supported"),
            };
            emit(b, n, "Scale", Op::ChannelAffine { scale, bias }, &[x], shape)
        }
        _ => bail!(Code::ModelInvalid, "operands of {op} are not supported (a pending Pad?)"),
    }
}

fn pool(b: &mut Builder, n: &NodeProto, max: bool) -> Result<()> {
    let (x, shape, _) = need_blob(b, n, 0)?;
    let what = if max { "MaxPool" } else { "AveragePool" };
    let (strides, dil, pads, auto) = window(n, what)?;
    let k = match attr_ints(n, "kernel_shape").as_deref() {
        Some(&[a, c]) if (1..=64).contains(&a) && (1..=64).contains(&c) => [a as usize, c as usize],
        v => bail!(Code::ModelInvalid, "kernel_shape {v:?} is not supported"),
    };
    if dil != [1, 1] {
        bail!(Code::ModelInvalid, "dilated pooling is not supported");
    }
    let ceil = attr_i(n, "ceil_mode", 0) != 0;
    let [pt, pl, pb, pr] = pads.unwrap_or([0; 4]);
    let (pad_mode, out) = match auto.as_str() {
        "NOTSET" | "" | "VALID" => {
            let (pt, pl, pb, pr) = if auto == "VALID" { (0, 0, 0, 0) } else { (pt, pl, pb, pr) };
            let mut out = [0usize; 2];
            for (d, (len, (p0, p1))) in [(shape[1], (pt, pb)), (shape[2], (pl, pr))].into_iter().enumerate() {
                let span = len + p0 + p1;
                if span < k[d] {
                    bail!(Code::ModelInvalid, "input {len} smaller than the {} kernel", k[d]);
                }
                let s = strides[d];
                let o = if ceil { (span - k[d]).div_ceil(s) + 1 } else { (span - k[d]) / s + 1 };
                if ceil && (o - 1) * s >= len + p0 {
                    // ONNX (as PyTorch) drops a last window that starts in the end padding; the
                    // executor's "full" mode keeps it: refuse where the two differ.
                    bail!(Code::ModelInvalid, "ceil_mode pooling whose last window starts in the padding is not supported");
                }
                if ceil && b.dynamic && p1 + s > k[d] {
                    bail!(Code::ModelInvalid, "ceil_mode pooling with stride over kernel minus padding on a free input size is not supported");
                }
                out[d] = o;
            }
            (if ceil { 0 } else { 1 }, out)
        }
        "SAME_UPPER" | "SAME_LOWER" => (if auto == "SAME_UPPER" { 2 } else { 3 }, [shape[1].div_ceil(strides[0]), shape[2].div_ceil(strides[1])]),
        a => bail!(Code::ModelInvalid, "auto_pad '{a}'"),
    };
    let p = Pooling {
        kind: if max { PoolKind::Max } else { PoolKind::Avg },
        global: false,
        kernel_w: k[1],
        kernel_h: k[0],
        stride_w: strides[1],
        stride_h: strides[0],
        pad_left: pl,
        pad_right: pr,
        pad_top: pt,
        pad_bottom: pb,
        pad_mode,
        count_include_pad: attr_i(n, "count_include_pad", 0) != 0,
        adaptive: false,
        out_w: 0,
        out_h: 0,
    };
    if !max && ceil && p.count_include_pad {
        bail!(Code::ModelInvalid, "AveragePool with ceil_mode and count_include_pad is not supported");
    }
    emit(b, n, "Pooling", Op::Pooling(p), &[x], [shape[0], out[0], out[1]])
}

fn resize(b: &mut Builder, n: &NodeProto, op: &str) -> Result<()> {
    let (x, shape, _) = need_blob(b, n, 0)?;
    // Scales or sizes, by opset: Upsample-7 an attribute, Upsample-9 / Resize-10 input 1,
    // Resize-11+ inputs 2 (scales) and 3 (sizes).
    let (scales, sizes) = if op == "Upsample" && b.opset < 9 {
        (attr(n, "scales").map(|a| Const::vector(a.floats.iter().map(|&v| v as f64).collect(), false)), None)
    } else if op == "Upsample" || b.opset < 11 {
        (Some(need_const(b, n, 1, "scales")?), None)
    } else {
        (opt_const(b, n, 2, "scales")?.filter(|c| c.numel() > 0), opt_const(b, n, 3, "sizes")?.filter(|c| c.numel() > 0))
    };
    let mode = attr_s(n, "mode", "nearest");
    let coord = if op == "Upsample" || b.opset < 11 { "asymmetric".to_string() } else { attr_s(n, "coordinate_transformation_mode", "half_pixel") };
    let nearest_mode = if b.opset < 11 { "floor".to_string() } else { attr_s(n, "nearest_mode", "round_prefer_floor") };
    if attr_i(n, "antialias", 0) != 0 || attr(n, "axes").is_some() || attr_i(n, "keep_aspect_ratio_policy", 0) != 0 && attr_s(n, "keep_aspect_ratio_policy", "stretch") != "stretch" {
        bail!(Code::ModelInvalid, "Resize with antialias, axes or an aspect-ratio policy is not supported");
    }
    // Output size and (for whole-number checks) the scale per axis (h, w).
    let (out, scale): ([usize; 2], [f64; 2]) = if let Some(s) = sizes {
        let v = s.i64s();
        if v.len() != 4 || v[0] != 1 || v[1] != shape[0] as i64 || v[2] < 1 || v[3] < 1 || v[2] > 1 << 16 || v[3] > 1 << 16 {
            bail!(Code::ModelInvalid, "Resize sizes {v:?} for an input of {shape:?}");
        }
        // On a free size: a scale (out / in at the nominal size), checked at a second size by `load`.
        b.shape_used |= b.dynamic;
        ([v[2] as usize, v[3] as usize], [v[2] as f64 / shape[1] as f64, v[3] as f64 / shape[2] as f64])
    } else if let Some(s) = scales {
        let v = s.data;
        if v.len() != 4 || v[0] != 1.0 || v[1] != 1.0 || !(v[2] > 0.0 && v[2] <= 64.0) || !(v[3] > 0.0 && v[3] <= 64.0) {
            bail!(Code::ModelInvalid, "Resize scales {v:?}: only height and width scales up to 64 are supported");
        }
        ([(shape[1] as f64 * v[2]) as usize, (shape[2] as f64 * v[3]) as usize], [v[2], v[3]])
    } else {
        bail!(Code::ModelInvalid, "Resize without scales or sizes");
    };
    if out[0] == 0 || out[1] == 0 {
        bail!(Code::ModelInvalid, "Resize to an empty output");
    }
    let whole = scale.iter().all(|s| s.fract() == 0.0);
    let (resize_type, align) = match mode.as_str() {
        "nearest" => {
            let exact = (coord == "asymmetric" && nearest_mode == "floor") || (whole && matches!(coord.as_str(), "asymmetric" | "half_pixel" | "pytorch_half_pixel") && (coord != "asymmetric" || nearest_mode != "ceil"));
            if !exact || (coord == "asymmetric" && nearest_mode != "floor" && !scale.iter().all(|&s| s == 1.0 || s == 2.0)) {
                bail!(Code::ModelInvalid, "nearest Resize with coordinates '{coord}' and rounding '{nearest_mode}' at scales {scale:?} is not supported");
            }
            (1, false)
        }
        "linear" | "bilinear" => match coord.as_str() {
            "half_pixel" => (2, false),
            "pytorch_half_pixel" if out[0] > 1 && out[1] > 1 => (2, false),
            "align_corners" => (2, true),
            c => bail!(Code::ModelInvalid, "linear Resize with coordinates '{c}' is not supported"),
        },
        // Keys cubic with A = -0.75 (PyTorch's bicubic), taps outside the input clamped to its edge.
        "cubic" if attr_f(n, "cubic_coeff_a", -0.75) == -0.75 && attr_i(n, "exclude_outside", 0) == 0 => match coord.as_str() {
            "half_pixel" => (3, false),
            "pytorch_half_pixel" if out[0] > 1 && out[1] > 1 => (3, false),
            "align_corners" => (3, true),
            c => bail!(Code::ModelInvalid, "cubic Resize with coordinates '{c}' is not supported"),
        },
        m => bail!(Code::ModelInvalid, "Resize mode '{m}' (with its cubic_coeff_a and exclude_outside) is not supported"),
    };
    let p = if sizes_fixed(b) {
        Interp { resize_type, height_scale: 0.0, width_scale: 0.0, output_h: out[0], output_w: out[1], align_corner: align }
    } else {
        Interp { resize_type, height_scale: scale[0] as f32, width_scale: scale[1] as f32, output_h: 0, output_w: 0, align_corner: align }
    };
    emit(b, n, "Interp", Op::Interp(p), &[x], [shape[0], out[0], out[1]])
}

/// A static input: every Resize gets its output size spelled out (exact, whatever the scale).
fn sizes_fixed(b: &Builder) -> bool {
    !b.dynamic
}



