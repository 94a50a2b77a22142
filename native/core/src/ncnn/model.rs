//! Typed network description built from a `.param` + `.bin` pair: every layer with its resolved
//! parameters (ncnn's defaults applied) and its weights as f32. Backends execute this; nothing
//! here computes.
//!
//! Long (~660 lines) on purpose: one typed constructor per ncnn layer kind, kept side by side so a layer's
//! parameters read next to its siblings'; parsing is in `param.rs`, weights in `bin.rs`.

use super::bin::WeightReader;
use super::param::{parse_param, LayerSpec, ParamDict};
use crate::bail;
use crate::error::{Code, Error, Result};
use std::collections::HashMap;
use std::path::Path;

/// Activation fused into Convolution / Deconvolution / InnerProduct (ncnn param 9 and 10).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Activation {
    None,
    Relu,
    LeakyRelu(f32),
    Clip(f32, f32),
    Sigmoid,
    Mish,
    HardSwish(f32, f32),
}

impl Activation {
    fn from_params(pd: &ParamDict) -> Result<Self> {
        let p = pd.get_floats(10);
        let at = |i: usize, d: f32| p.get(i).copied().unwrap_or(d);
        Ok(match pd.get_int(9, 0) {
            0 => Activation::None,
            1 => Activation::Relu,
            2 => {
                let s = at(0, 0.0);
                if s == 0.0 { Activation::Relu } else { Activation::LeakyRelu(s) }
            }
            3 => Activation::Clip(at(0, f32::MIN), at(1, f32::MAX)),
            4 => Activation::Sigmoid,
            5 => Activation::Mish,
            6 => Activation::HardSwish(at(0, 0.2), at(1, 0.5)),
            t => bail!(Code::ModelInvalid, "unknown fused activation type {t}"),
        })
    }

    #[inline]
    pub fn apply(self, v: f32) -> f32 {
        match self {
            Activation::None => v,
            Activation::Relu => v.max(0.0),
            Activation::LeakyRelu(s) => if v < 0.0 { v * s } else { v },
            Activation::Clip(lo, hi) => v.max(lo).min(hi),
            Activation::Sigmoid => 1.0 / (1.0 + (-v).exp()),
            Activation::Mish => v * ((1.0 + v.exp()).ln()).tanh(),
            Activation::HardSwish(a, b) => {
                let lower = -b / a;
                let upper = 1.0 / a + lower;
                if v < lower { 0.0 } else if v > upper { v } else { v * (v * a + b) }
            }
        }
    }
}

/// Padding of a convolution or pooling window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Padding {
    /// Explicit pixels: left, right, top, bottom.
    Explicit { left: usize, right: usize, top: usize, bottom: usize },
    /// ncnn -233: pad so that out = ceil(in / stride), extra on the bottom/right.
    SameUpper,
    /// ncnn -234: same, extra on the top/left.
    SameLower,
}

impl Padding {
    fn from_params(pd: &ParamDict, left_id: i32, right_id: i32, top_id: i32, bottom_id: i32) -> Result<Self> {
        let left = pd.get_int(left_id, 0);
        if left == -233 {
            return Ok(Padding::SameUpper);
        }
        if left == -234 {
            return Ok(Padding::SameLower);
        }
        let right = pd.get_int(right_id, left);
        let top = pd.get_int(top_id, left);
        let bottom = pd.get_int(bottom_id, top);
        if left < 0 || right < 0 || top < 0 || bottom < 0 {
            bail!(Code::ModelInvalid, "negative padding {left},{right},{top},{bottom}");
        }
        Ok(Padding::Explicit { left: left as usize, right: right as usize, top: top as usize, bottom: bottom as usize })
    }

    /// Resolve to explicit (left, right, top, bottom) for an input of w x h with the given
    /// effective kernel extents and strides.
    pub fn resolve(&self, w: usize, h: usize, kext_w: usize, kext_h: usize, stride_w: usize, stride_h: usize) -> (usize, usize, usize, usize) {
        match *self {
            Padding::Explicit { left, right, top, bottom } => (left, right, top, bottom),
            Padding::SameUpper | Padding::SameLower => {
                let total = |n: usize, k: usize, s: usize| {
                    let out = n.div_ceil(s);
                    ((out - 1) * s + k).saturating_sub(n)
                };
                let tw = total(w, kext_w, stride_w);
                let th = total(h, kext_h, stride_h);
                if matches!(self, Padding::SameUpper) {
                    (tw / 2, tw - tw / 2, th / 2, th - th / 2)
                } else {
                    (tw - tw / 2, tw / 2, th - th / 2, th / 2)
                }
            }
        }
    }
}

/// Convolution, ConvolutionDepthWise (group > 1), Deconvolution and DeconvolutionDepthWise.
/// Weights: (num_output, num_input / group, kernel_h, kernel_w), row-major. For deconvolution the
/// same layout holds and the semantics are "scatter": out[y*stride + ky*dil][x*stride + kx*dil]
/// += in[y][x] * w[o][i][ky][kx], then `pad` is cut off the full output.
#[derive(Debug, Clone)]
pub struct Conv {
    pub num_output: usize,
    pub num_input: usize,
    pub group: usize,
    pub kernel_w: usize,
    pub kernel_h: usize,
    pub dilation_w: usize,
    pub dilation_h: usize,
    pub stride_w: usize,
    pub stride_h: usize,
    pub pad: Padding,
    pub pad_value: f32,
    /// Deconvolution only: extra output on the right / bottom, and a fixed output size (0 = none).
    pub output_pad_right: usize,
    pub output_pad_bottom: usize,
    pub output_w: usize,
    pub output_h: usize,
    pub weight: Vec<f32>,
    pub bias: Option<Vec<f32>>,
    pub activation: Activation,
}

impl Conv {
    pub fn in_per_group(&self) -> usize {
        self.num_input / self.group
    }
    pub fn out_per_group(&self) -> usize {
        self.num_output / self.group
    }
    /// Multiply-accumulates per output pixel (for GFLOP/s reporting).
    pub fn macs_per_output_pixel(&self) -> usize {
        self.num_output * self.in_per_group() * self.kernel_w * self.kernel_h
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOpKind {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    Pow,
    RSub,
    RDiv,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EltwiseKind {
    Prod,
    Sum,
    Max,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    Avg,
}

#[derive(Debug, Clone)]
pub struct Pooling {
    pub kind: PoolKind,
    pub global: bool,
    pub kernel_w: usize,
    pub kernel_h: usize,
    pub stride_w: usize,
    pub stride_h: usize,
    pub pad_left: usize,
    pub pad_right: usize,
    pub pad_top: usize,
    pub pad_bottom: usize,
    /// 0 full (ceil), 1 valid (floor), 2 same upper, 3 same lower.
    pub pad_mode: i32,
    pub count_include_pad: bool,
    pub adaptive: bool,
    pub out_w: usize,
    pub out_h: usize,
}

/// Crop, either by fixed offsets/sizes (params 0..8) or by starts/ends/axes arrays (9, 10, 11),
/// or to the size of a second input blob.
#[derive(Debug, Clone)]
pub struct Crop {
    pub woffset: i32,
    pub hoffset: i32,
    pub coffset: i32,
    pub outw: i32,
    pub outh: i32,
    pub outc: i32,
    pub woffset2: i32,
    pub hoffset2: i32,
    pub coffset2: i32,
    pub starts: Vec<i32>,
    pub ends: Vec<i32>,
    pub axes: Vec<i32>,
}

#[derive(Debug, Clone)]
pub struct Interp {
    /// 1 nearest, 2 bilinear, 3 bicubic.
    pub resize_type: i32,
    pub height_scale: f32,
    pub width_scale: f32,
    pub output_h: usize,
    pub output_w: usize,
    pub align_corner: bool,
}

/// Shifted-window multi-head self-attention over a 3-D blob of `3·C` channels (queries, keys,
/// values, each `C` channels; head `h` owns channels `h·d .. (h+1)·d` of each, `d = C / heads`);
/// output `C` channels of the input's size. Steps, as Swin / DAT compute them:
/// 1. zero-pad bottom/right to a multiple of `pad_multiple` (q = k = v = 0 there);
/// 2. cyclic shift: the shifted frame's pixel (y, x) is the padded frame's
///    ((y + shift_y) mod H', (x + shift_x) mod W') (`torch.roll` by -shift);
/// 3. per `win_h` x `win_w` window of the shifted frame and head: `softmax(q·kᵀ·scale + bias
///    [+ mask]) · v`, tokens in row-major order in the window, `bias` (heads x N x N, N = win_h·win_w)
///    added as is;
/// 4. with `masked`, the Swin mask: each pixel of the shifted frame gets a region label from
///    Python's slices `(0, -win), (-win, -shift), (-shift, None)` per axis (later slices win), and
///    pairs of tokens with different labels get `mask_value` (-100 in Swin and DAT);
/// 5. shift back and crop the padding. See [`crate::reference::window_attention`].
#[derive(Debug, Clone)]
pub struct WindowAttention {
    pub heads: usize,
    pub win_h: usize,
    pub win_w: usize,
    pub shift_y: usize,
    pub shift_x: usize,
    pub pad_multiple: usize,
    pub scale: f32,
    /// heads x N x N, added to the scaled scores (relative position bias); empty = none.
    pub bias: Vec<f32>,
    pub masked: bool,
    pub mask_value: f32,
}

/// Overlapping cross-attention (HAT's OCAB) over a 3-D blob of `3·C` channels (queries, keys,
/// values, each `C` channels; head `h` owns channels `h·d .. (h+1)·d` of each, `d = C / heads`);
/// output `C` channels of the input's size. The blob is read as zero outside its `H x W` pixels.
/// Query windows are the non-overlapping `window x window` squares tiling the frame from (0, 0)
/// (`ceil(H / window) x ceil(W / window)` of them, the last ones reaching into the zeros). The
/// key/value window of query window (wy, wx) is the `overlap x overlap` square whose top-left
/// pixel is (wy·window - p, wx·window - p), `p = (overlap - window) / 2` (`nn.Unfold` with
/// padding p and stride `window`): tokens outside the blob are k = v = 0 and still take part in
/// the softmax (their score is the bias alone). Per window and head:
/// `softmax(q·kᵀ·scale + bias) · v`, query tokens (Nq = window²) and key tokens
/// (Nk = overlap²) each in row-major order within their window, `bias` (heads x Nq x Nk) added
/// as is. `overlap - window` must be even and ≥ 0. See [`crate::reference::overlap_attention`].
#[derive(Debug, Clone)]
pub struct OverlapAttention {
    pub heads: usize,
    /// Side of the (non-overlapping) query windows.
    pub window: usize,
    /// Side of the key/value windows, centred on the query windows.
    pub overlap: usize,
    pub scale: f32,
    /// heads x Nq x Nk, added to the scaled scores (relative position bias); empty = none.
    pub bias: Vec<f32>,
}

#[derive(Debug, Clone)]
pub enum Op {
    Input { w: i32, h: i32, c: i32 },
    Conv(Conv),
    Deconv(Conv),
    InnerProduct { num_output: usize, num_input: usize, weight: Vec<f32>, bias: Option<Vec<f32>>, activation: Activation },
    ReLU { slope: f32 },
    PReLU { slope: Vec<f32> },
    Sigmoid,
    TanH,
    Clip { min: f32, max: f32 },
    /// Per-channel affine (BatchNorm folded, or Scale).
    ChannelAffine { scale: Vec<f32>, bias: Vec<f32> },
    PixelShuffle { factor: usize, mode: i32 },
    Interp(Interp),
    BinaryOp { op: BinaryOpKind, scalar: Option<f32> },
    Eltwise { op: EltwiseKind, coeffs: Vec<f32> },
    /// axis as in ncnn (0 = channels for a 3-D blob; negative counts from the end).
    Concat { axis: i32 },
    Split,
    Crop(Crop),
    Pooling(Pooling),
    Permute { order_type: i32 },
    Reshape { w: i32, h: i32, c: i32 },
    Flatten,
    Softmax { axis: i32 },
    Noop,
    /// RIFE's `rife.Warp` (inputs: image C x H x W, flow 2 x H x W): bilinear backward warp,
    /// out(c, y, x) = image(c, y + flow_y, x + flow_x) with the sample point clamped to the image
    /// (border padding). See [`crate::reference::warp`].
    Warp,
    /// Layer normalisation over the channels of each pixel of a 3-D blob (PyTorch's
    /// `nn.LayerNorm(c)` on (h·w, c) tokens): `(x - mean) / sqrt(var + eps) · weight + bias`, the
    /// variance biased. See [`crate::reference::layer_norm`].
    LayerNorm { weight: Vec<f32>, bias: Vec<f32>, eps: f32 },
    /// GELU in its exact (erf) form, PyTorch's default: `x · (1 + erf(x / √2)) / 2`.
    Gelu,
    /// Bottom/right reflect padding of a 3-D blob up to the next multiple of `multiple` in
    /// height and width (PyTorch's `F.pad(x, (0, pw, 0, ph), "reflect")`); a no-op when already
    /// a multiple. See [`crate::reference::pad_to_multiple`].
    PadToMultiple { multiple: usize },
    /// Shifted-window multi-head self-attention (Swin / DAT). See [`WindowAttention`].
    WindowAttention(WindowAttention),
    /// Transposed (channel) multi-head attention over the whole blob (DAT's channel attention,
    /// Restormer's MDTA). Input: `3·C` channels (queries, keys, values), output `C`. Per head `h`
    /// of `d = C / heads` channels: q and k rows (one per channel, over all pixels) are L2
    /// normalised (`max(‖·‖, 1e-12)`), `A = softmax(q·kᵀ · temperature[h])` (d x d), out = A·v.
    ChannelAttention { heads: usize, temperature: Vec<f32> },
    /// Overlapping window cross-attention (HAT's OCAB). See [`OverlapAttention`].
    OverlapAttention(OverlapAttention),
    /// A layer type this engine does not implement itself (none known today); a backend either
    /// knows it by name or fails with `model_invalid` at run time.
    Custom { kind: String, params: ParamDict },
}

#[derive(Debug, Clone)]
pub struct Layer {
    pub name: String,
    pub kind: String,
    pub op: Op,
    pub bottoms: Vec<usize>,
    pub tops: Vec<usize>,
}

#[derive(Debug, Clone)]
pub struct Net {
    pub layers: Vec<Layer>,
    pub blob_names: Vec<String>,
    blob_index: HashMap<String, usize>,
}

impl Net {
    pub fn load(param_path: &Path, bin_path: &Path) -> Result<Net> {
        let text = std::fs::read_to_string(param_path).map_err(|e| {
            Error::new(Code::ModelMissing, format!("cannot read {}: {e}", param_path.display()))
        })?;
        let bin = std::fs::read(bin_path)
            .map_err(|e| Error::new(Code::ModelMissing, format!("cannot read {}: {e}", bin_path.display())))?;
        Net::from_parts(&text, &bin)
    }

    /// Load `<stem>.param` + `<stem>.bin`.
    pub fn load_stem(stem: &Path) -> Result<Net> {
        let p = stem.with_extension("param");
        let b = stem.with_extension("bin");
        // with_extension would replace a dotted suffix inside the name (e.g. "x2.0x_model"), so
        // build the paths by appending instead.
        let p = if p.file_name() == stem.file_name() { p } else { append_ext(stem, "param") };
        let b = if b.file_name() == stem.file_name() { b } else { append_ext(stem, "bin") };
        Net::load(&p, &b)
    }

    pub fn from_parts(param_text: &str, bin: &[u8]) -> Result<Net> {
        let specs = parse_param(param_text)?;
        let mut reader = WeightReader::new(bin);
        let mut blob_index: HashMap<String, usize> = HashMap::new();
        let mut blob_names: Vec<String> = Vec::new();
        let mut layers = Vec::with_capacity(specs.len());
        for spec in specs {
            let mut bottoms = Vec::with_capacity(spec.bottoms.len());
            for b in &spec.bottoms {
                match blob_index.get(b) {
                    Some(&i) => bottoms.push(i),
                    None => bail!(Code::ModelInvalid, "layer {} reads blob '{b}' before it is produced", spec.name),
                }
            }
            let mut tops = Vec::with_capacity(spec.tops.len());
            for t in &spec.tops {
                let i = blob_names.len();
                if blob_index.insert(t.clone(), i).is_some() {
                    bail!(Code::ModelInvalid, "blob '{t}' is produced twice");
                }
                blob_names.push(t.clone());
                tops.push(i);
            }
            let op = build_op(&spec, &mut reader)?;
            layers.push(Layer { name: spec.name, kind: spec.kind, op, bottoms, tops });
        }
        if reader.remaining() != 0 {
            bail!(Code::ModelInvalid, "weight file has {} unused bytes: param and bin do not match", reader.remaining());
        }
        Ok(Net { layers, blob_names, blob_index })
    }

    /// A network from layers whose blob indices point into `blob_names` (probe networks built in
    /// code, such as the GPU backend's one-convolution tuning runs).
    pub fn from_layers(layers: Vec<Layer>, blob_names: Vec<String>) -> Net {
        let blob_index = blob_names.iter().enumerate().map(|(i, n)| (n.clone(), i)).collect();
        Net { layers, blob_names, blob_index }
    }

    pub fn blob(&self, name: &str) -> Option<usize> {
        self.blob_index.get(name).copied()
    }

    /// Blobs produced by an `Input` layer, in order.
    pub fn input_blobs(&self) -> Vec<usize> {
        self.layers.iter().filter(|l| matches!(l.op, Op::Input { .. })).flat_map(|l| l.tops.clone()).collect()
    }

    /// Blobs no layer consumes (the network outputs), in order of production.
    pub fn output_blobs(&self) -> Vec<usize> {
        let mut used = vec![false; self.blob_names.len()];
        for l in &self.layers {
            for &b in &l.bottoms {
                used[b] = true;
            }
        }
        (0..self.blob_names.len()).filter(|&b| !used[b]).collect()
    }
}

fn append_ext(stem: &Path, ext: &str) -> std::path::PathBuf {
    let mut s = stem.as_os_str().to_owned();
    s.push(".");
    s.push(ext);
    s.into()
}

fn usize_param(pd: &ParamDict, id: i32, default: i32, what: &str, layer: &str) -> Result<usize> {
    let v = pd.get_int(id, default);
    if v < 0 {
        bail!(Code::ModelInvalid, "layer {layer}: {what} = {v} is negative");
    }
    Ok(v as usize)
}

fn build_conv(spec: &LayerSpec, r: &mut WeightReader, deconv: bool) -> Result<Conv> {
    let pd = &spec.params;
    let n = &spec.name;
    let num_output = usize_param(pd, 0, 0, "num_output", n)?;
    let kernel_w = usize_param(pd, 1, 0, "kernel_w", n)?;
    let kernel_h = usize_param(pd, 11, kernel_w as i32, "kernel_h", n)?;
    let dilation_w = usize_param(pd, 2, 1, "dilation_w", n)?;
    let dilation_h = usize_param(pd, 12, dilation_w as i32, "dilation_h", n)?;
    let stride_w = usize_param(pd, 3, 1, "stride_w", n)?;
    let stride_h = usize_param(pd, 13, stride_w as i32, "stride_h", n)?;
    let pad = Padding::from_params(pd, 4, 15, 14, 16)?;
    let bias_term = pd.get_int(5, 0) != 0;
    let weight_size = usize_param(pd, 6, 0, "weight_data_size", n)?;
    let group = if spec.kind.ends_with("DepthWise") { usize_param(pd, 7, 1, "group", n)? } else { 1 };
    if pd.get_int(8, 0) != 0 {
        bail!(Code::ModelInvalid, "layer {n}: int8 convolution is not supported");
    }
    if pd.get_int(19, 0) != 0 && !deconv {
        bail!(Code::ModelInvalid, "layer {n}: dynamic-weight convolution is not supported");
    }
    let maxk = kernel_w * kernel_h;
    if num_output == 0 || maxk == 0 || group == 0 || stride_w == 0 || stride_h == 0 || dilation_w == 0 || dilation_h == 0 {
        bail!(Code::ModelInvalid, "layer {n}: zero-sized kernel, output, group, stride or dilation");
    }
    if weight_size % (maxk * num_output) != 0 || num_output % group != 0 {
        bail!(Code::ModelInvalid, "layer {n}: weight_data_size {weight_size} does not fit {num_output} outputs of {kernel_w}x{kernel_h}");
    }
    let num_input = weight_size / (maxk * num_output) * group;
    let activation = Activation::from_params(pd)?;
    let weight = r.tagged(weight_size, &format!("{n} weights"))?;
    let bias = if bias_term { Some(r.raw(num_output, &format!("{n} bias"))?) } else { None };
    let (output_pad_right, output_pad_bottom, output_w, output_h) = if deconv {
        let opr = usize_param(pd, 18, 0, "output_pad_right", n)?;
        (
            opr,
            usize_param(pd, 19, opr as i32, "output_pad_bottom", n)?,
            usize_param(pd, 20, 0, "output_w", n)?,
            usize_param(pd, 21, 0, "output_h", n)?,
        )
    } else {
        (0, 0, 0, 0)
    };
    let pad_value = if deconv { 0.0 } else { pd.get_float(18, 0.0) };
    Ok(Conv {
        num_output,
        num_input,
        group,
        kernel_w,
        kernel_h,
        dilation_w,
        dilation_h,
        stride_w,
        stride_h,
        pad,
        pad_value,
        output_pad_right,
        output_pad_bottom,
        output_w,
        output_h,
        weight,
        bias,
        activation,
    })
}

fn build_op(spec: &LayerSpec, r: &mut WeightReader) -> Result<Op> {
    let pd = &spec.params;
    let n = &spec.name;
    Ok(match spec.kind.as_str() {
        "Input" => Op::Input { w: pd.get_int(0, 0), h: pd.get_int(1, 0), c: pd.get_int(2, 0) },
        "Convolution" | "ConvolutionDepthWise" => Op::Conv(build_conv(spec, r, false)?),
        "Deconvolution" | "DeconvolutionDepthWise" => Op::Deconv(build_conv(spec, r, true)?),
        "InnerProduct" => {
            let num_output = usize_param(pd, 0, 0, "num_output", n)?;
            let bias_term = pd.get_int(1, 0) != 0;
            let size = usize_param(pd, 2, 0, "weight_data_size", n)?;
            if num_output == 0 || size % num_output != 0 {
                bail!(Code::ModelInvalid, "layer {n}: weight_data_size {size} does not fit {num_output} outputs");
            }
            if pd.get_int(8, 0) != 0 {
                bail!(Code::ModelInvalid, "layer {n}: int8 inner product is not supported");
            }
            let activation = Activation::from_params(pd)?;
            let weight = r.tagged(size, &format!("{n} weights"))?;
            let bias = if bias_term { Some(r.raw(num_output, &format!("{n} bias"))?) } else { None };
            Op::InnerProduct { num_output, num_input: size / num_output, weight, bias, activation }
        }
        "ReLU" => Op::ReLU { slope: pd.get_float(0, 0.0) },
        "PReLU" => {
            let num = usize_param(pd, 0, 0, "num_slope", n)?;
            Op::PReLU { slope: r.raw(num, &format!("{n} slopes"))? }
        }
        "Sigmoid" => Op::Sigmoid,
        "TanH" => Op::TanH,
        "Clip" => Op::Clip { min: pd.get_float(0, f32::MIN), max: pd.get_float(1, f32::MAX) },
        "BatchNorm" => {
            let c = usize_param(pd, 0, 0, "channels", n)?;
            let eps = pd.get_float(1, 0.0);
            let slope = r.raw(c, n)?;
            let mean = r.raw(c, n)?;
            let var = r.raw(c, n)?;
            let bias = r.raw(c, n)?;
            let mut sc = Vec::with_capacity(c);
            let mut bi = Vec::with_capacity(c);
            for i in 0..c {
                let s = slope[i] / (var[i] + eps).sqrt();
                sc.push(s);
                bi.push(bias[i] - mean[i] * s);
            }
            Op::ChannelAffine { scale: sc, bias: bi }
        }
        "Scale" => {
            let c = usize_param(pd, 0, 0, "scale_data_size", n)?;
            if c == 0 || spec.bottoms.len() != 1 {
                bail!(Code::ModelInvalid, "layer {n}: only Scale with stored scale data is supported");
            }
            let scale = r.raw(c, n)?;
            let bias = if pd.get_int(1, 0) != 0 { r.raw(c, n)? } else { vec![0.0; c] };
            Op::ChannelAffine { scale, bias }
        }
        "PixelShuffle" => Op::PixelShuffle { factor: usize_param(pd, 0, 1, "upscale_factor", n)?.max(1), mode: pd.get_int(1, 0) },
        "Interp" => {
            if pd.get_int(5, 0) != 0 {
                bail!(Code::ModelInvalid, "layer {n}: dynamic-size Interp is not supported");
            }
            Op::Interp(Interp {
                resize_type: pd.get_int(0, 0),
                height_scale: pd.get_float(1, 1.0),
                width_scale: pd.get_float(2, 1.0),
                output_h: usize_param(pd, 3, 0, "output_height", n)?,
                output_w: usize_param(pd, 4, 0, "output_width", n)?,
                align_corner: pd.get_int(6, 0) != 0,
            })
        }
        "BinaryOp" => {
            let op = match pd.get_int(0, 0) {
                0 => BinaryOpKind::Add,
                1 => BinaryOpKind::Sub,
                2 => BinaryOpKind::Mul,
                3 => BinaryOpKind::Div,
                4 => BinaryOpKind::Max,
                5 => BinaryOpKind::Min,
                6 => BinaryOpKind::Pow,
                7 => BinaryOpKind::RSub,
                8 => BinaryOpKind::RDiv,
                t => bail!(Code::ModelInvalid, "layer {n}: BinaryOp type {t} is not supported"),
            };
            let scalar = if pd.get_int(1, 0) != 0 { Some(pd.get_float(2, 0.0)) } else { None };
            Op::BinaryOp { op, scalar }
        }
        "Eltwise" => {
            let op = match pd.get_int(0, 0) {
                0 => EltwiseKind::Prod,
                1 => EltwiseKind::Sum,
                2 => EltwiseKind::Max,
                t => bail!(Code::ModelInvalid, "layer {n}: Eltwise type {t} is not supported"),
            };
            Op::Eltwise { op, coeffs: pd.get_floats(1) }
        }
        "Concat" => Op::Concat { axis: pd.get_int(0, 0) },
        "Split" => Op::Split,
        "Crop" => Op::Crop(Crop {
            woffset: pd.get_int(0, 0),
            hoffset: pd.get_int(1, 0),
            coffset: pd.get_int(2, 0),
            outw: pd.get_int(3, 0),
            outh: pd.get_int(4, 0),
            outc: pd.get_int(5, 0),
            woffset2: pd.get_int(6, 0),
            hoffset2: pd.get_int(7, 0),
            coffset2: pd.get_int(8, 0),
            starts: pd.get_ints(9),
            ends: pd.get_ints(10),
            axes: pd.get_ints(11),
        }),
        "Pooling" => {
            let kernel_w = usize_param(pd, 1, 0, "kernel_w", n)?;
            let stride_w = usize_param(pd, 2, 1, "stride_w", n)?;
            let pad_left = usize_param(pd, 3, 0, "pad_left", n)?;
            let pad_top = usize_param(pd, 13, pad_left as i32, "pad_top", n)?;
            Op::Pooling(Pooling {
                kind: if pd.get_int(0, 0) == 0 { PoolKind::Max } else { PoolKind::Avg },
                global: pd.get_int(4, 0) != 0,
                kernel_w,
                kernel_h: usize_param(pd, 11, kernel_w as i32, "kernel_h", n)?,
                stride_w,
                stride_h: usize_param(pd, 12, stride_w as i32, "stride_h", n)?,
                pad_left,
                pad_right: usize_param(pd, 14, pad_left as i32, "pad_right", n)?,
                pad_top,
                pad_bottom: usize_param(pd, 15, pad_top as i32, "pad_bottom", n)?,
                pad_mode: pd.get_int(5, 0),
                count_include_pad: pd.get_int(6, 0) != 0,
                adaptive: pd.get_int(7, 0) != 0,
                out_w: usize_param(pd, 8, 0, "out_w", n)?,
                out_h: usize_param(pd, 18, pd.get_int(8, 0), "out_h", n)?,
            })
        }
        "Permute" => Op::Permute { order_type: pd.get_int(0, 0) },
        "Reshape" => Op::Reshape { w: pd.get_int(0, -233), h: pd.get_int(1, -233), c: pd.get_int(2, -233) },
        "Flatten" => Op::Flatten,
        "Softmax" => Op::Softmax { axis: pd.get_int(0, 0) },
        "Noop" | "Dropout" => Op::Noop,
        "rife.Warp" => {
            if spec.bottoms.len() != 2 || spec.tops.len() != 1 {
                bail!(Code::ModelInvalid, "layer {n}: rife.Warp takes an image and a flow and gives one blob");
            }
            Op::Warp
        }
        other if other.contains('.') => Op::Custom { kind: other.to_string(), params: pd.clone() },
        other => bail!(Code::ModelInvalid, "layer {n}: layer type '{other}' is not supported"),
    })
}
