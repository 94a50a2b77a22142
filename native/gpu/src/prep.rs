//! Prepared networks on the device thread: weight upload, fusion, per-run shape inference and
//! recording (each step by its op, `ops/`), buffer pooling and readback (`rec.rs`).
//! Over 500 lines on purpose: building the step list (with its fusion decisions) and running it
//! share one step type; splitting them would put the two halves of each fusion in different files.
//!
//! Fusions: a convolution takes the activation / PReLU after it and a residual add
//! (`conv_step.rs`); the compact SR networks' last PixelShuffle + Interp + add is one
//! kernel (`ops/resample.rs`). The kernel of each convolution comes from `choice.rs`, or from
//! the tuner's measurements (`tune.rs`, run by lib.rs before [`Prep::build`]).

use crate::choice::Gemm;
use crate::ops::conv::{conv_shape, ConvW};
use crate::conv_step::{self, upload_weights, ConvStep, Res};
use crate::ops::copy::{self, crop_region};
use crate::ops::direct::{self, deconv_shape};
use crate::ops::pool::{self, pool_geometry};
use crate::ops::resample::{self, interp_size};
use crate::ops::{attention, eltwise, overlap, softmax, warp, Io};
use crate::rec::{to_bytes, upload, Pool, Rec};
use crate::shape::{broadcast, reshape_shape, Shape};
use crate::{DevCtx, Settings};
use lucent_core::bail;
use lucent_core::error::{Code, Error, Result};
use lucent_core::ncnn::{Activation, BinaryOpKind, EltwiseKind, Net, Op};
use lucent_core::{Cancel, Tensor};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// GPU time of one step of the last run (a step is a layer, or a convolution with the layers
/// fused into it).
#[derive(Clone, Debug)]
pub struct LayerTime {
    pub layer: String,
    pub kind: String,
    pub ms: f64,
    /// Multiply-adds x 2 of a convolution step (0 for other steps).
    pub flop: f64,
    /// The convolution kernel that ran ("coop", "mma-emulated", "fma", "rb", "direct"; "+pipelined" appended to a GEMM in that form; empty otherwise).
    pub kernel: String,
}

enum Kind {
    Conv { l: usize, conv: ConvStep },
    Deconv { l: usize, cw: ConvW },
    Inner { l: usize, cw: ConvW },
    Layer { l: usize, aux: Option<wgpu::Buffer> },
    /// PixelShuffle `ps` + Interp `interp` + their sum (`add`), one kernel: the compact SR
    /// networks' last step, which otherwise writes and reads two full-resolution blobs.
    /// `ps_first`: the PixelShuffle output is the add's first operand.
    PshufAdd { ps: usize, interp: usize, ps_first: bool },
}

struct Step {
    kind: Kind,
    bottoms: Vec<usize>,
    tops: Vec<usize>,
    name: String,
    type_: String,
}

pub(crate) struct Prep {
    net: Arc<Net>,
    steps: Vec<Step>,
    settings: Settings,
    fused_away: HashSet<usize>,
    pool: Pool,
    pub last_profile: Vec<LayerTime>,
    /// No profile on stderr (the tuner's probe runs).
    pub(crate) quiet: bool,
}

/// PixelShuffle layer `i` whose only consumer is a plain add (BinaryOp add / Eltwise sum with unit
/// coefficients) of an Interp output used nowhere else, the Interp coming after `i` in the layer
/// order and its input before: (interp layer, add layer, PixelShuffle output is the first operand).
fn pshuf_add_pattern(net: &Net, i: usize, consumers: &[Vec<usize>], producer: &[usize]) -> Option<(usize, usize, bool)> {
    let l = &net.layers[i];
    if l.bottoms.len() != 1 || l.tops.len() != 1 || consumers[l.tops[0]].len() != 1 {
        return None;
    }
    let out = l.tops[0];
    let k = consumers[out][0];
    let lk = &net.layers[k];
    let plain_add = match &lk.op {
        Op::BinaryOp { op: BinaryOpKind::Add, scalar: None } => true,
        Op::Eltwise { op: EltwiseKind::Sum, coeffs } => coeffs.iter().all(|&c| c == 1.0),
        _ => false,
    };
    if !plain_add || lk.bottoms.len() != 2 || lk.tops.len() != 1 || lk.bottoms[0] == lk.bottoms[1] {
        return None;
    }
    let ps_first = lk.bottoms[0] == out;
    let other = lk.bottoms[if ps_first { 1 } else { 0 }];
    let j = *producer.get(other)?;
    if j == usize::MAX || j <= i || j >= k || consumers[other].len() != 1 {
        return None;
    }
    let lj = &net.layers[j];
    let Op::Interp(_) = lj.op else { return None };
    if lj.bottoms.len() != 1 || lj.tops.len() != 1 || producer[lj.bottoms[0]] >= i {
        return None;
    }
    Some((j, k, ps_first))
}

impl Prep {
    /// Prepare `net` with the GEMMs in `choices` (layer index -> kernel) and the default choice
    /// elsewhere.
    pub(crate) fn build(ctx: &mut DevCtx, net: Arc<Net>, settings: Settings, choices: &HashMap<usize, Gemm>) -> Result<Prep> {
        let nb = net.blob_names.len();
        let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); nb];
        let mut producer: Vec<usize> = vec![usize::MAX; nb];
        for (i, l) in net.layers.iter().enumerate() {
            for &b in &l.bottoms {
                consumers[b].push(i);
            }
            for &t in &l.tops {
                producer[t] = i;
            }
        }
        let mut skip = vec![false; net.layers.len()];
        let mut fused_away = HashSet::new();
        let mut steps = Vec::new();
        for (i, l) in net.layers.iter().enumerate() {
            if skip[i] {
                continue;
            }
            let (name, type_) = (l.name.clone(), l.kind.clone());
            if let Op::PixelShuffle { .. } = &l.op {
                if let Some((j, k, ps_first)) = pshuf_add_pattern(&net, i, &consumers, &producer) {
                    skip[j] = true;
                    skip[k] = true;
                    fused_away.insert(l.tops[0]);
                    fused_away.insert(net.layers[j].tops[0]);
                    steps.push(Step {
                        kind: Kind::PshufAdd { ps: i, interp: j, ps_first },
                        bottoms: vec![l.bottoms[0], net.layers[j].bottoms[0]],
                        tops: vec![net.layers[k].tops[0]],
                        name: format!("{}+{}+{}", l.name, net.layers[j].name, net.layers[k].name),
                        type_: "PixelShuffle+Interp+Add".into(),
                    });
                    continue;
                }
            }
            match &l.op {
                Op::Conv(c) => {
                    if l.bottoms.len() != 1 || l.tops.len() != 1 {
                        bail!(Code::ModelInvalid, "layer {}: convolution needs one input and one output", l.name);
                    }
                    let mut out = l.tops[0];
                    let mut act = c.activation;
                    let mut prelu: Option<&[f32]> = None;
                    let mut fused_names = vec![l.name.clone()];
                    if act == Activation::None && consumers[out].len() == 1 {
                        let j = consumers[out][0];
                        let lj = &net.layers[j];
                        let post = match &lj.op {
                            Op::PReLU { slope } if slope.len() == 1 || slope.len() == c.num_output => {
                                prelu = Some(slope);
                                true
                            }
                            Op::ReLU { slope } => {
                                act = if *slope == 0.0 { Activation::Relu } else { Activation::LeakyRelu(*slope) };
                                true
                            }
                            Op::Clip { min, max } => {
                                act = Activation::Clip(*min, *max);
                                true
                            }
                            Op::Sigmoid => {
                                act = Activation::Sigmoid;
                                true
                            }
                            _ => false,
                        };
                        if post && lj.tops.len() == 1 {
                            skip[j] = true;
                            fused_away.insert(out);
                            out = lj.tops[0];
                            fused_names.push(lj.name.clone());
                        } else {
                            act = c.activation;
                            prelu = None;
                        }
                    }
                    let mut res = None;
                    if consumers[out].len() == 1 {
                        let k = consumers[out][0];
                        let lk = &net.layers[k];
                        let coeffs = match &lk.op {
                            Op::Eltwise { op: EltwiseKind::Sum, coeffs } => Some(coeffs.clone()),
                            Op::BinaryOp { op: BinaryOpKind::Add, scalar: None } => Some(Vec::new()),
                            _ => None,
                        };
                        if let Some(coeffs) = coeffs {
                            if lk.bottoms.len() == 2 && lk.tops.len() == 1 && lk.bottoms[0] != lk.bottoms[1] {
                                let pos = if lk.bottoms[0] == out { 0 } else { 1 };
                                let other = lk.bottoms[1 - pos];
                                if producer[other] < i {
                                    let (cc, cr) =
                                        if coeffs.len() >= 2 { (coeffs[pos], coeffs[1 - pos]) } else { (1.0, 1.0) };
                                    res = Some(Res { blob: other, c_conv: cc, c_res: cr });
                                    skip[k] = true;
                                    fused_away.insert(out);
                                    out = lk.tops[0];
                                    fused_names.push(lk.name.clone());
                                }
                            }
                        }
                    }
                    let (cw, kernel) = upload_weights(ctx, c, &settings, false, prelu, act, choices.get(&i).copied())?;
                    let mut bottoms = vec![l.bottoms[0]];
                    if let Some(r) = &res {
                        bottoms.push(r.blob);
                    }
                    steps.push(Step {
                        kind: Kind::Conv { l: i, conv: ConvStep { cw, kernel, res } },
                        bottoms,
                        tops: vec![out],
                        name: fused_names.join("+"),
                        type_,
                    });
                }
                Op::Deconv(c) => {
                    let (cw, _) = upload_weights(ctx, c, &settings, true, None, c.activation, None)?;
                    steps.push(Step { kind: Kind::Deconv { l: i, cw }, bottoms: l.bottoms.clone(), tops: l.tops.clone(), name, type_ });
                }
                Op::InnerProduct { num_output, weight, bias, activation, .. } => {
                    let aux = bias.clone().unwrap_or_else(|| vec![0.0; *num_output]);
                    let cw = ConvW {
                        w: upload(ctx, weight, settings.f16, "inner product weights")?,
                        aux: upload(ctx, &aux, false, "aux")?,
                        act: *activation,
                        prelu: None,
                    };
                    steps.push(Step { kind: Kind::Inner { l: i, cw }, bottoms: l.bottoms.clone(), tops: l.tops.clone(), name, type_ });
                }
                op => {
                    let aux = match op {
                        Op::PReLU { slope } => Some(upload(ctx, slope, false, "prelu")?),
                        Op::ChannelAffine { scale, bias } => {
                            let mut v = scale.clone();
                            v.extend_from_slice(bias);
                            Some(upload(ctx, &v, false, "affine")?)
                        }
                        Op::LayerNorm { weight, bias, .. } => {
                            let mut v = weight.clone();
                            v.extend_from_slice(bias);
                            Some(upload(ctx, &v, false, "layer norm")?)
                        }
                        Op::WindowAttention(wa) if !wa.bias.is_empty() => Some(upload(ctx, &wa.bias, false, "position bias")?),
                        Op::OverlapAttention(oa) if !oa.bias.is_empty() => Some(upload(ctx, &oa.bias, false, "position bias")?),
                        Op::ChannelAttention { temperature, .. } if !temperature.is_empty() => Some(upload(ctx, temperature, false, "temperature")?),
                        _ => None,
                    };
                    steps.push(Step { kind: Kind::Layer { l: i, aux }, bottoms: l.bottoms.clone(), tops: l.tops.clone(), name, type_ });
                }
            }
        }
        ctx.check()?;
        Ok(Prep { net, steps, settings, fused_away, pool: HashMap::new(), last_profile: Vec::new(), quiet: false })
    }

    /// The kernel of each convolution step ("coop", "mma-emulated", "fma", "rb", "direct"; "+pipelined" appended to a GEMM in that form), in order.
    pub fn conv_kernels(&self) -> Vec<&'static str> {
        self.steps
            .iter()
            .filter_map(|s| match &s.kind {
                Kind::Conv { conv, .. } => Some(conv.kernel.name()),
                _ => None,
            })
            .collect()
    }

    pub fn run(&mut self, ctx: &mut DevCtx, inputs: &[(usize, Tensor)], outputs: &[usize], cancel: &Cancel) -> Result<Vec<Tensor>> {
        let nb = self.net.blob_names.len();
        for &o in outputs {
            if o >= nb {
                bail!(Code::InvalidArgument, "output blob {o} does not exist");
            }
            if self.fused_away.contains(&o) {
                bail!(Code::InvalidArgument, "blob '{}' is internal to a fused GPU kernel", self.net.blob_names[o]);
            }
        }
        // Steps needed for the requested outputs.
        let mut needed_blob = vec![false; nb];
        for &o in outputs {
            needed_blob[o] = true;
        }
        let mut needed = vec![false; self.steps.len()];
        for (si, s) in self.steps.iter().enumerate().rev() {
            if s.tops.iter().any(|&t| needed_blob[t]) {
                needed[si] = true;
                for &b in &s.bottoms {
                    needed_blob[b] = true;
                }
            }
        }
        let mut uses = vec![0usize; nb];
        for (si, s) in self.steps.iter().enumerate() {
            if needed[si] {
                for &b in &s.bottoms {
                    uses[b] += 1;
                }
            }
        }
        for &o in outputs {
            uses[o] += 1 << 30;
        }
        let mut rec = Rec::new(&ctx.limits, nb, self.settings.f16, std::mem::take(&mut self.pool));
        let input_map: HashMap<usize, &Tensor> = inputs.iter().map(|(i, t)| (*i, t)).collect();
        let recorded = self.record_all(ctx, &mut rec, &needed, &mut uses, &input_map).and_then(|()| cancel.check());
        if let Err(e) = recorded {
            self.pool = std::mem::take(&mut rec.pool);
            return Err(e);
        }
        let result = rec.submit(ctx, outputs, self.settings.profile);
        self.pool = std::mem::take(&mut rec.pool);
        // Keep in the pool only what this run used; give the rest back to the device.
        let used: HashSet<u64> = rec.used.iter().map(|b| b.size()).collect();
        for slot in rec.slots.drain(..) {
            if slot.refs > 0 {
                self.pool.entry(slot.buf.size()).or_default().push(slot.buf);
            }
        }
        self.pool.retain(|k, _| used.contains(k));
        let mut counts: HashMap<u64, usize> = HashMap::new();
        for b in &rec.used {
            *counts.entry(b.size()).or_default() += 1;
        }
        for (k, v) in self.pool.iter_mut() {
            let keep = counts.get(k).copied().unwrap_or(0);
            while v.len() > keep {
                v.pop();
            }
        }
        let (out, times) = result?;
        if let Some(times) = times {
            self.profile(&rec, &times);
        }
        Ok(out)
    }

    /// Record the `needed` steps in order, releasing each blob after its last use.
    fn record_all(&self, ctx: &mut DevCtx, rec: &mut Rec, needed: &[bool], uses: &mut [usize], inputs: &HashMap<usize, &Tensor>) -> Result<()> {
        for (si, s) in self.steps.iter().enumerate() {
            if !needed[si] {
                continue;
            }
            rec.step = si;
            self.record(ctx, rec, si, inputs)?;
            for &b in &s.bottoms {
                uses[b] -= 1;
                if uses[b] == 0 {
                    rec.release_blob(b);
                }
            }
            for &t in &s.tops {
                if uses[t] == 0 {
                    rec.release_blob(t);
                }
            }
        }
        Ok(())
    }

    /// Keep the last run's per-step times (`times`: (step, ms) per run of commands) and print
    /// them unless quiet.
    fn profile(&mut self, rec: &Rec, times: &[(usize, f64)]) {
        self.last_profile = times
            .iter()
            .map(|&(s, ms)| {
                let (flop, kernel) = rec.conv_notes.get(&s).copied().unwrap_or((0.0, ""));
                LayerTime { layer: self.steps[s].name.clone(), kind: self.steps[s].type_.clone(), ms, flop, kernel: kernel.to_string() }
            })
            .collect();
        let sum: f64 = self.last_profile.iter().map(|t| t.ms).sum();
        let flop: f64 = self.last_profile.iter().map(|t| t.flop).sum();
        if !self.quiet {
            for t in &self.last_profile {
                let rate = if t.flop > 0.0 && t.ms > 0.0 { format!("{:>8.4} TFLOP/s", t.flop / t.ms / 1e9) } else { " ".repeat(16) };
                eprintln!("[lucent-gpu] {:>9.3} ms {rate} {:<12} {:<14} {}", t.ms, t.kernel, t.kind, t.layer);
            }
            eprintln!(
                "[lucent-gpu] {sum:>9.3} ms  total GPU time over {} steps; convolutions {:.4} TFLOP, {:.4} TFLOP/s overall",
                self.last_profile.len(),
                flop / 1e12,
                if sum > 0.0 { flop / sum / 1e9 } else { 0.0 }
            );
        }
    }

    fn record(&self, ctx: &mut DevCtx, rec: &mut Rec, si: usize, inputs: &HashMap<usize, &Tensor>) -> Result<()> {
        let net = &self.net;
        let step = &self.steps[si];
        let ins: Vec<Shape> = step
            .bottoms
            .iter()
            .map(|&b| {
                rec.blobs[b].as_ref().map(|x| x.shape).ok_or_else(|| {
                    Error::new(Code::InvalidArgument, format!("blob '{}' has no value (missing input?)", net.blob_names[b]))
                })
            })
            .collect::<Result<_>>()?;
        let io = Io { name: &step.name, bottoms: &step.bottoms, tops: &step.tops, ins: &ins };
        match &step.kind {
            Kind::Conv { l, conv } => {
                let Op::Conv(c) = &net.layers[*l].op else { unreachable!() };
                conv_step::record(ctx, rec, &io, c, conv, self.settings.f16_math)
            }
            Kind::Deconv { l, cw } => {
                let Op::Deconv(c) = &net.layers[*l].op else { unreachable!() };
                direct::record_deconv(ctx, rec, &io, c, cw)
            }
            Kind::Inner { l, cw } => {
                let Op::InnerProduct { num_output, num_input, .. } = &net.layers[*l].op else { unreachable!() };
                direct::record_inner(ctx, rec, &io, (*num_output, *num_input), cw)
            }
            Kind::PshufAdd { ps, interp, ps_first } => {
                let Op::PixelShuffle { factor, mode } = &net.layers[*ps].op else { unreachable!() };
                let Op::Interp(ip) = &net.layers[*interp].op else { unreachable!() };
                resample::record_pshuf_add(ctx, rec, &io, (*factor, *mode), ip, *ps_first)
            }
            Kind::Layer { l, aux } => {
                let layer = &net.layers[*l];
                let lname = io.name;
                match &layer.op {
                    Op::Input { .. } => {
                        for &t in &step.tops {
                            let Some(tensor) = inputs.get(&t) else {
                                bail!(Code::InvalidArgument, "input blob '{}' was not given", net.blob_names[t]);
                            };
                            let s = Shape { dims: tensor.dims, c: tensor.c, h: tensor.h, w: tensor.w };
                            if s.len() != tensor.data.len() || s.len() == 0 {
                                bail!(Code::InvalidArgument, "input tensor's shape does not match its data");
                            }
                            let b = rec.alloc_blob(ctx, t, s)?;
                            let mut bytes = to_bytes(&tensor.data, rec.f16);
                            bytes.resize(bytes.len().div_ceil(4) * 4, 0);
                            rec.uploads.push((b, bytes));
                        }
                        Ok(())
                    }
                    Op::Split | Op::Noop => {
                        for &t in &step.tops {
                            rec.alias(t, step.bottoms[0], ins[0]);
                        }
                        Ok(())
                    }
                    Op::Reshape { w, h, c } => {
                        let s = reshape_shape(ins[0], *w, *h, *c, lname)?;
                        rec.alias(step.tops[0], step.bottoms[0], s);
                        Ok(())
                    }
                    Op::Flatten => {
                        let s = Shape { dims: 1, c: 1, h: 1, w: ins[0].len() };
                        rec.alias(step.tops[0], step.bottoms[0], s);
                        Ok(())
                    }
                    Op::ReLU { .. } | Op::PReLU { .. } | Op::Sigmoid | Op::TanH | Op::Clip { .. } | Op::ChannelAffine { .. } | Op::Gelu => {
                        let aux = aux.clone().unwrap_or_else(|| ctx.dummy.clone());
                        eltwise::record_unary(ctx, rec, &io, &layer.op, aux)
                    }
                    Op::BinaryOp { op, scalar } => eltwise::record_binary_op(ctx, rec, &io, *op, *scalar),
                    Op::Eltwise { op, coeffs } => eltwise::record_eltwise(ctx, rec, &io, *op, coeffs),
                    Op::PixelShuffle { factor, mode } => resample::record_pshuf(ctx, rec, &io, *factor, *mode),
                    Op::Interp(ip) => resample::record_interp(ctx, rec, &io, ip),
                    Op::Concat { axis } => copy::record_concat(ctx, rec, &io, *axis),
                    Op::Crop(cr) => copy::record_crop(ctx, rec, &io, cr),
                    Op::Permute { order_type } => copy::record_permute(ctx, rec, &io, *order_type),
                    Op::Softmax { axis } => softmax::record_softmax(ctx, rec, &io, *axis),
                    Op::Pooling(pl) => pool::record_pool(ctx, rec, &io, pl),
                    Op::Warp => warp::record(ctx, rec, &io),
                    Op::LayerNorm { weight, bias, eps } => {
                        if weight.len() != bias.len() {
                            bail!(Code::ModelInvalid, "layer {lname}: LayerNorm of {} weights and {} biases", weight.len(), bias.len());
                        }
                        let aux = aux.clone().unwrap_or_else(|| ctx.dummy.clone());
                        attention::record_layer_norm(ctx, rec, &io, weight.len(), *eps, aux)
                    }
                    Op::PadToMultiple { multiple } => attention::record_pad(ctx, rec, &io, *multiple),
                    Op::WindowAttention(wa) => {
                        let aux = aux.clone().unwrap_or_else(|| ctx.dummy.clone());
                        attention::record_window(ctx, rec, &io, wa, aux)
                    }
                    Op::ChannelAttention { heads, temperature } => {
                        let aux = aux.clone().unwrap_or_else(|| ctx.dummy.clone());
                        attention::record_channel(ctx, rec, &io, *heads, temperature.len(), aux)
                    }
                    Op::OverlapAttention(p) => {
                        let aux = aux.clone().unwrap_or_else(|| ctx.dummy.clone());
                        overlap::record(ctx, rec, &io, p, aux)
                    }
                    Op::Custom { kind, .. } => {
                        bail!(Code::ModelInvalid, "layer {lname}: custom layer '{kind}' is not supported by the GPU backend")
                    }
                    Op::Conv(_) | Op::Deconv(_) | Op::InnerProduct { .. } => unreachable!(),
                }
            }
        }
    }
}

/// Largest input tile side for this network on a device with these limits: the widest blob
/// must fit one storage binding (and one buffer), with a quarter of headroom.
pub(crate) fn max_tile(net: &Net, limits: &wgpu::Limits, f16: bool) -> usize {
    let probe = 64usize;
    let ratio = widest_blob(net, probe).unwrap_or(64 * 16) as f64 / (probe * probe) as f64;
    let es = if f16 { 2.0 } else { 4.0 };
    let cap = (limits.max_storage_buffer_binding_size as f64).min(limits.max_buffer_size as f64) * 0.75;
    let side = (cap / (es * ratio.max(1.0))).sqrt() as usize;
    (side / 16 * 16).clamp(32, 8192)
}

/// Elements of the largest blob for a square input of `side` pixels (shape walk only).
fn widest_blob(net: &Net, side: usize) -> Option<usize> {
    let mut shapes: Vec<Option<Shape>> = vec![None; net.blob_names.len()];
    let mut best = 0usize;
    for l in &net.layers {
        let ins: Vec<Shape> = l.bottoms.iter().filter_map(|&b| shapes[b]).collect();
        if ins.len() != l.bottoms.len() {
            return None;
        }
        let outs: Vec<Shape> = match &l.op {
            Op::Input { c, .. } => vec![Shape::d3(if *c > 0 { *c as usize } else { 3 }, side, side); l.tops.len()],
            Op::Conv(c) => vec![conv_shape(c, ins[0], "").ok()?.0],
            Op::Deconv(c) => vec![deconv_shape(c, ins[0]).0],
            Op::PixelShuffle { factor, .. } => {
                let s = ins[0];
                vec![Shape::d3(s.c / (factor * factor).max(1), s.h * factor, s.w * factor)]
            }
            Op::Interp(ip) => {
                let (h, w) = interp_size(ip, ins[0]);
                vec![Shape::d3(ins[0].c, h, w)]
            }
            Op::Concat { .. } => {
                let mut s = ins[0];
                s.c = ins.iter().map(|x| x.c).sum();
                vec![s]
            }
            Op::Pooling(p) => vec![pool_geometry(p, ins[0], "").ok()?.out],
            Op::PadToMultiple { multiple } => vec![attention::pad_shape(ins[0], *multiple, "").ok()?],
            Op::InnerProduct { num_output, .. } => vec![Shape { dims: 1, c: 1, h: 1, w: *num_output }],
            Op::Crop(cr) => vec![crop_region(cr, ins[0], ins.get(1).copied(), "").ok()?.0],
            Op::BinaryOp { .. } | Op::Eltwise { .. } if ins.len() == 2 => vec![broadcast(ins[0], ins[1], "").ok()?.0],
            _ => vec![*ins.first()?; l.tops.len()],
        };
        for (&t, s) in l.tops.iter().zip(outs.iter().cycle()) {
            best = best.max(s.len());
            shapes[t] = Some(*s);
        }
    }
    Some(best)
}
