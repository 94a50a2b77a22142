//! Networks built from a detected architecture, as a [`Net`] of the ops every backend already
//! runs (Convolution with fused leaky ReLU, PReLU, Eltwise sums with coefficients, channel
//! Concat, channel Crop, nearest Interp, max Pooling, PixelShuffle, Sigmoid, BinaryOp, per-channel affine). Pixel-unshuffle,
//! which has no op of its own, is a stride-r convolution with one-hot weights (exact).
//! The transformers (SwinIR, DAT, HAT) and SAFMN add the ops of `lucent_core::reference::attention` (LayerNorm,
//! GELU, PadToMultiple, WindowAttention, ChannelAttention), which the CPU backend runs through
//! the reference executor and the GPU backend refuses (`model_invalid`) for now; HAT also adds
//! OverlapAttention (`lucent_core::reference::overlap`), which only the CPU backend runs. Blobs stay
//! planar (c, h, w): a per-token linear layer is a 1x1 convolution.
//! Input blob `in0`, output blob `out0`.

mod compact;
mod dat;
mod esrgan;
mod hat;
mod realplksr;
mod safmn;
mod span;
mod swinir;

use crate::detect::{dim, get, Arch};
use crate::tensor::StateDict;
use lucent_core::ncnn::model::{Activation, BinaryOpKind, Conv, Crop, EltwiseKind, Interp, Layer, Net, Op, OverlapAttention, Padding, PoolKind, Pooling, WindowAttention};
use lucent_core::{bail, Code, Result};

/// Build the network for `arch` from its (canonical) state dict.
pub fn build(arch: &Arch, sd: &StateDict) -> Result<Net> {
    match arch {
        Arch::Esrgan(p) => esrgan::build(p, sd),
        Arch::Compact(p) => compact::build(p, sd),
        Arch::Span(p) => span::build(p, sd),
        Arch::RealPlksr(p) => realplksr::build(p, sd),
        Arch::SwinIr(p) => swinir::build(p, sd),
        Arch::Dat(p) => dat::build(p, sd),
        Arch::Safmn(p) => safmn::build(p, sd),
        Arch::Hat(p) => hat::build(p, sd),
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

    /// A per-token `nn.Linear` from `{key}.weight` (out, in) / `{key}.bias`, as a 1x1 convolution.
    pub fn linear(&mut self, sd: &StateDict, key: &str, x: B, act: Activation) -> Result<B> {
        let w = get(sd, &format!("{key}.weight"))?;
        let bias = sd.get(&format!("{key}.bias")).map(|b| b.data.clone());
        let [o, i] = w.shape[..] else {
            bail!(Code::ModelInvalid, "'{key}' is not a linear layer weight (shape {:?})", w.shape);
        };
        self.conv_raw(key, &[o, i, 1, 1], w.data.clone(), bias, x, act)
    }

    /// A grouped convolution (depthwise when `group` = channels), stride 1, "same" padding.
    #[allow(clippy::too_many_arguments)]
    pub fn conv_grouped(&mut self, name: &str, shape: &[usize], group: usize, weight: Vec<f32>, bias: Option<Vec<f32>>, x: B, act: Activation) -> Result<B> {
        let [o, ipg, kh, kw] = shape else {
            bail!(Code::ModelInvalid, "'{name}' is not a 2-D convolution weight (shape {shape:?})");
        };
        let (o, ipg, kh, kw) = (*o, *ipg, *kh, *kw);
        if group == 0 || !o.is_multiple_of(group) || kh % 2 == 0 || kw % 2 == 0 || weight.len() != o * ipg * kh * kw || bias.as_ref().is_some_and(|b| b.len() != o) {
            bail!(Code::ModelInvalid, "'{name}': grouped convolution of shape {shape:?}, {group} groups, is not supported");
        }
        let pad = Padding::Explicit { left: kw / 2, right: kw / 2, top: kh / 2, bottom: kh / 2 };
        let mut c = conv_op(o, ipg * group, kh, kw, 1, pad, weight, bias, act);
        c.group = group;
        Ok(self.add(name, "ConvolutionDepthWise", Op::Conv(c), &[x]))
    }

    /// The conv at `conv` (grouped by `group`) followed by the eval-mode `nn.BatchNorm2d` at `bn`,
    /// folded into one convolution (in f64).
    pub fn conv_bn(&mut self, sd: &StateDict, conv: &str, bn: &str, group: usize, x: B, act: Activation) -> Result<B> {
        let w = get(sd, &format!("{conv}.weight"))?;
        let o = w.shape.first().copied().unwrap_or(0);
        let per = w.data.len().checked_div(o).unwrap_or(0);
        let b0 = sd.get(&format!("{conv}.bias")).map(|b| b.data.clone()).unwrap_or_else(|| vec![0.0; o]);
        let [g, beta, mean, var] = ["weight", "bias", "running_mean", "running_var"].map(|n| get(sd, &format!("{bn}.{n}")).map(|p| p.data.clone()));
        let (g, beta, mean, var) = (g?, beta?, mean?, var?);
        if [b0.len(), g.len(), beta.len(), mean.len(), var.len()].iter().any(|&n| n != o) {
            bail!(Code::ModelInvalid, "'{bn}' does not fit the {o} outputs of '{conv}'");
        }
        let mut wf = w.data.clone();
        let mut bf = vec![0f32; o];
        for k in 0..o {
            let s = g[k] as f64 / (var[k] as f64 + 1e-5).sqrt();
            for v in &mut wf[k * per..(k + 1) * per] {
                *v = (*v as f64 * s) as f32;
            }
            bf[k] = ((b0[k] as f64 - mean[k] as f64) * s + beta[k] as f64) as f32;
        }
        self.conv_grouped(conv, &w.shape, group, wf, Some(bf), x, act)
    }

    /// `nn.LayerNorm` (eps 1e-5) at `key` over the channels of each pixel.
    pub fn layer_norm(&mut self, sd: &StateDict, key: &str, x: B) -> Result<B> {
        let weight = get(sd, &format!("{key}.weight"))?.data.clone();
        let bias = get(sd, &format!("{key}.bias"))?.data.clone();
        Ok(self.add(key, "LayerNorm", Op::LayerNorm { weight, bias, eps: 1e-5 }, &[x]))
    }

    pub fn gelu(&mut self, name: &str, x: B) -> B {
        self.add(name, "GELU", Op::Gelu, &[x])
    }

    pub fn window_attention(&mut self, name: &str, p: WindowAttention, x: B) -> B {
        self.add(name, "WindowAttention", Op::WindowAttention(p), &[x])
    }

    pub fn overlap_attention(&mut self, name: &str, p: OverlapAttention, x: B) -> B {
        self.add(name, "OverlapAttention", Op::OverlapAttention(p), &[x])
    }

    pub fn channel_attention(&mut self, name: &str, heads: usize, temperature: Vec<f32>, x: B) -> B {
        self.add(name, "ChannelAttention", Op::ChannelAttention { heads, temperature }, &[x])
    }

    pub fn pad_to_multiple(&mut self, name: &str, x: B, multiple: usize) -> B {
        self.add(name, "PadToMultiple", Op::PadToMultiple { multiple }, &[x])
    }

    /// The top-left corner of `x` of `like`'s shape (channels, height, width).
    pub fn crop_like(&mut self, name: &str, x: B, like: B) -> B {
        let crop = Crop { woffset: 0, hoffset: 0, coffset: 0, outw: 0, outh: 0, outc: 0, woffset2: 0, hoffset2: 0, coffset2: 0, starts: vec![], ends: vec![], axes: vec![] };
        self.add(name, "Crop", Op::Crop(crop), &[x, like])
    }

    /// Global average over each channel, as a (c, 1, 1) blob (`nn.AdaptiveAvgPool2d(1)`).
    pub fn global_avg(&mut self, name: &str, x: B) -> B {
        let p = Pooling {
            kind: PoolKind::Avg,
            global: true,
            kernel_w: 0,
            kernel_h: 0,
            stride_w: 1,
            stride_h: 1,
            pad_left: 0,
            pad_right: 0,
            pad_top: 0,
            pad_bottom: 0,
            pad_mode: 0,
            count_include_pad: false,
            adaptive: false,
            out_w: 0,
            out_h: 0,
        };
        let v = self.add(&format!("{name}.pool"), "Pooling", Op::Pooling(p), &[x]);
        self.add(name, "Reshape", Op::Reshape { w: 1, h: 1, c: -1 }, &[v])
    }

    /// The `{key}.{0,2,..}` conv + pixel-shuffle stages of an `Upsample` module (scale 2^n or 3).
    pub fn upsample_stages(&mut self, sd: &StateDict, key: &str, mut x: B) -> Result<B> {
        let mut i = 0;
        while sd.contains_key(&format!("{key}.{i}.weight")) {
            let k = format!("{key}.{i}");
            let (o, c) = (dim(sd, &format!("{k}.weight"), 0)?, dim(sd, &format!("{k}.weight"), 1)?);
            let r = (o / c.max(1)).isqrt();
            if r < 2 || r * r * c != o {
                bail!(Code::ModelInvalid, "'{k}': {o} outputs for {c} inputs is no pixel-shuffle stage");
            }
            x = self.conv(sd, &k, x, Activation::None)?;
            x = self.pixel_shuffle(&format!("{key}.{}", i + 1), x, r);
            i += 2;
        }
        Ok(x)
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
