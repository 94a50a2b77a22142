//! Networks built from a detected architecture, as a [`Net`] of the ops every backend already
//! runs (Convolution with fused leaky ReLU, PReLU, Eltwise sums with coefficients, channel
//! Concat, channel Crop, nearest Interp, PixelShuffle, Sigmoid, BinaryOp, per-channel affine). Pixel-unshuffle,
//! which has no op of its own, is a stride-r convolution with one-hot weights (exact).
//! Input blob `in0`, output blob `out0`.

mod compact;
mod esrgan;
mod realplksr;
mod span;

use crate::detect::{get, Arch};
use crate::tensor::StateDict;
use lucent_core::ncnn::model::{Activation, BinaryOpKind, Conv, Crop, EltwiseKind, Interp, Layer, Net, Op, Padding};
use lucent_core::{bail, Code, Result};

/// Build the network for `arch` from its (canonical) state dict.
pub fn build(arch: &Arch, sd: &StateDict) -> Result<Net> {
    match arch {
        Arch::Esrgan(p) => esrgan::build(p, sd),
        Arch::Compact(p) => compact::build(p, sd),
        Arch::Span(p) => span::build(p, sd),
        Arch::RealPlksr(p) => realplksr::build(p, sd),
    }
}

/// A network under construction: layers in execution order, one top blob each.
pub(crate) struct Graph {
    layers: Vec<Layer>,
    blobs: Vec<String>,
}

/// A blob index.
pub(crate) type B = usize;

impl Graph {
    pub fn new() -> (Graph, B) {
        let mut g = Graph { layers: Vec::new(), blobs: Vec::new() };
        let x = g.add("in0", "Input", Op::Input { w: 0, h: 0, c: 0 }, &[]);
        (g, x)
    }

    pub fn add(&mut self, name: &str, kind: &str, op: Op, bottoms: &[B]) -> B {
        let top = self.blobs.len();
        let blob = if kind == "Input" { "in0".to_string() } else { format!("{name}#{top}") };
        self.blobs.push(blob);
        self.layers.push(Layer { name: name.to_string(), kind: kind.to_string(), op, bottoms: bottoms.to_vec(), tops: vec![top] });
        top
    }

    /// A convolution from `{key}.weight` / `{key}.bias` (PyTorch's (out, in, kh, kw) layout is
    /// ncnn's), stride 1, "same" zero padding.
    pub fn conv(&mut self, sd: &StateDict, key: &str, x: B, act: Activation) -> Result<B> {
        let w = get(sd, &format!("{key}.weight"))?;
        let bias = sd.get(&format!("{key}.bias")).map(|b| b.data.clone());
        self.conv_raw(key, &w.shape, w.data.clone(), bias, x, act)
    }

    pub fn conv_raw(&mut self, name: &str, shape: &[usize], weight: Vec<f32>, bias: Option<Vec<f32>>, x: B, act: Activation) -> Result<B> {
        let [o, i, kh, kw] = shape else {
            bail!(Code::ModelInvalid, "'{name}' is not a 2-D convolution weight (shape {shape:?})");
        };
        let (o, i, kh, kw) = (*o, *i, *kh, *kw);
        if o == 0 || i == 0 || kh % 2 == 0 || kw % 2 == 0 || weight.len() != o * i * kh * kw {
            bail!(Code::ModelInvalid, "'{name}': convolution weight of shape {shape:?} is not supported");
        }
        if bias.as_ref().is_some_and(|b| b.len() != o) {
            bail!(Code::ModelInvalid, "'{name}': bias length does not match {o} outputs");
        }
        let pad = Padding::Explicit { left: kw / 2, right: kw / 2, top: kh / 2, bottom: kh / 2 };
        Ok(self.add(name, "Convolution", Op::Conv(conv_op(o, i, kh, kw, 1, pad, weight, bias, act)), &[x]))
    }

    /// `torch.pixel_unshuffle(x, r)` on `c` channels: output channel `ci·r² + dy·r + dx` holds
    /// input pixel (r·y + dy, r·x + dx) of channel `ci`.
    pub fn pixel_unshuffle(&mut self, x: B, c: usize, r: usize) -> B {
        let o = c * r * r;
        let mut w = vec![0.0f32; o * c * r * r];
        for ci in 0..c {
            for dy in 0..r {
                for dx in 0..r {
                    let oc = ci * r * r + dy * r + dx;
                    w[((oc * c + ci) * r + dy) * r + dx] = 1.0;
                }
            }
        }
        let pad = Padding::Explicit { left: 0, right: 0, top: 0, bottom: 0 };
        self.add("pixel_unshuffle", "Convolution", Op::Conv(conv_op(o, c, r, r, r, pad, w, None, Activation::None)), &[x])
    }

    pub fn prelu(&mut self, name: &str, slope: Vec<f32>, x: B) -> B {
        self.add(name, "PReLU", Op::PReLU { slope }, &[x])
    }

    /// `a·ca + b·cb`.
    pub fn sum(&mut self, name: &str, a: B, ca: f32, b: B, cb: f32) -> B {
        self.add(name, "Eltwise", Op::Eltwise { op: EltwiseKind::Sum, coeffs: vec![ca, cb] }, &[a, b])
    }

    pub fn concat(&mut self, name: &str, xs: &[B]) -> B {
        self.add(name, "Concat", Op::Concat { axis: 0 }, xs)
    }

    pub fn nearest(&mut self, name: &str, x: B, scale: usize) -> B {
        let s = scale as f32;
        let op = Op::Interp(Interp { resize_type: 1, height_scale: s, width_scale: s, output_h: 0, output_w: 0, align_corner: false });
        self.add(name, "Interp", op, &[x])
    }

    pub fn pixel_shuffle(&mut self, name: &str, x: B, r: usize) -> B {
        self.add(name, "PixelShuffle", Op::PixelShuffle { factor: r, mode: 0 }, &[x])
    }

    pub fn sigmoid(&mut self, name: &str, x: B) -> B {
        self.add(name, "Sigmoid", Op::Sigmoid, &[x])
    }

    pub fn mul(&mut self, name: &str, a: B, b: B) -> B {
        self.add(name, "BinaryOp", Op::BinaryOp { op: BinaryOpKind::Mul, scalar: None }, &[a, b])
    }

    pub fn sub_scalar(&mut self, name: &str, x: B, s: f32) -> B {
        self.add(name, "BinaryOp", Op::BinaryOp { op: BinaryOpKind::Sub, scalar: Some(s) }, &[x])
    }

    pub fn pow_scalar(&mut self, name: &str, x: B, s: f32) -> B {
        self.add(name, "BinaryOp", Op::BinaryOp { op: BinaryOpKind::Pow, scalar: Some(s) }, &[x])
    }

    /// Channels `start..end` of a 3-D blob.
    pub fn crop_channels(&mut self, name: &str, x: B, start: usize, end: usize) -> B {
        let crop = Crop {
            woffset: 0,
            hoffset: 0,
            coffset: 0,
            outw: 0,
            outh: 0,
            outc: 0,
            woffset2: 0,
            hoffset2: 0,
            coffset2: 0,
            starts: vec![start as i32],
            ends: vec![end as i32],
            axes: vec![0],
        };
        self.add(name, "Crop", Op::Crop(crop), &[x])
    }

    pub fn affine(&mut self, name: &str, x: B, scale: Vec<f32>, bias: Vec<f32>) -> B {
        self.add(name, "Scale", Op::ChannelAffine { scale, bias }, &[x])
    }

    /// Finish with `out` renamed to `out0`.
    pub fn finish(mut self, out: B) -> Net {
        self.blobs[out] = "out0".to_string();
        Net::from_layers(self.layers, self.blobs)
    }
}

#[allow(clippy::too_many_arguments)]
fn conv_op(o: usize, i: usize, kh: usize, kw: usize, stride: usize, pad: Padding, weight: Vec<f32>, bias: Option<Vec<f32>>, act: Activation) -> Conv {
    Conv {
        num_output: o,
        num_input: i,
        group: 1,
        kernel_w: kw,
        kernel_h: kh,
        dilation_w: 1,
        dilation_h: 1,
        stride_w: stride,
        stride_h: stride,
        pad,
        pad_value: 0.0,
        output_pad_right: 0,
        output_pad_bottom: 0,
        output_w: 0,
        output_h: 0,
        weight,
        bias,
        activation: act,
    }
}
