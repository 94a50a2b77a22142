//! Prepared networks on the device thread: weight upload, fusion, per-run shape inference,
//! recording of one command encoder per run, buffer pooling and readback.
//!
//! Long (~1800 lines) on purpose: the one place that turns every layer kind into a recorded GPU
//! dispatch or copy (kernel choice, params, buffers); the kernels' WGSL lives in `kernels.rs`,
//! `mma.rs`, `rb.rs`, `warp.rs`.

use crate::kernels::{self, ConvCfg, EW};
use crate::rb::{self, RbCfg, RbShape};
use crate::mma::{self, MmaCfg, MmaMode};
use crate::tune::{self, Tuning};
use crate::{DevCtx, Settings};
use lucent_core::bail;
use lucent_core::error::{Code, Error, Result};
use lucent_core::ncnn::{Activation, BinaryOpKind, Conv, EltwiseKind, Net, Op, Padding, PoolKind};
use lucent_core::{Cancel, Tensor};
use std::collections::{HashMap, HashSet};
use std::num::NonZeroU64;
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub dims: u8,
    pub c: usize,
    pub h: usize,
    pub w: usize,
}

impl Shape {
    fn d3(c: usize, h: usize, w: usize) -> Shape {
        Shape { dims: 3, c, h, w }
    }
    fn len(&self) -> usize {
        self.c * self.h * self.w
    }
    fn plane(&self) -> usize {
        match self.dims {
            3 => self.h * self.w,
            2 => self.w,
            _ => 1,
        }
    }
}

/// The FMA kernel's tile configurations, widest first: [wide M, narrow M].
pub(crate) fn fma_cfg_lists() -> [Vec<ConvCfg>; 2] {
    let wide = vec![
        ConvCfg::new(64, 128, 16, 8),
        ConvCfg::new(64, 64, 16, 4),
        ConvCfg::new(32, 32, 16, 4),
        ConvCfg::new(16, 16, 8, 4),
    ];
    let narrow = vec![
        ConvCfg::new(16, 128, 16, 4),
        ConvCfg::new(16, 64, 16, 4),
        ConvCfg::new(16, 16, 8, 4),
    ];
    [wide, narrow]
}

/// Choose a convolution tile configuration that fits the device's limits (pipelined: the
/// pipelined form of the first tile whose double-size tiles fit).
pub(crate) fn default_cfg(limits: &wgpu::Limits, small_m: bool, acc16: bool, pipelined: bool) -> ConvCfg {
    let [wide, narrow] = fma_cfg_lists();
    let list: &[ConvCfg] = if small_m { &narrow } else { &wide };
    let form = |c: &ConvCfg| if pipelined { c.pipelined() } else { *c };
    list.iter().map(form).find(|c| c.fits_device(limits, acc16)).unwrap_or(*list.last().unwrap())
}

fn size_class(b: u64) -> u64 {
    let b = b.max(256);
    let step = (b.next_power_of_two() / 8).max(256);
    b.div_ceil(step) * step
}

fn fold(groups: usize, maxdim: u32) -> Result<(u32, u32)> {
    let m = maxdim.max(1) as usize;
    if groups <= m {
        return Ok((groups.max(1) as u32, 1));
    }
    let y = groups.div_ceil(m);
    if y > m {
        bail!(Code::ImageTooLarge, "dispatch of {groups} workgroups exceeds the device limits");
    }
    Ok((groups.div_ceil(y) as u32, y as u32))
}

fn act_code(a: Activation) -> (u32, f32, f32) {
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

fn fb(v: f32) -> u32 {
    v.to_bits()
}

struct Res {
    blob: usize,
    c_conv: f32,
    c_res: f32,
}

struct ConvW {
    w: wgpu::Buffer,
    aux: wgpu::Buffer,
    kernel: ConvKernel,
    act: Activation,
    prelu: Option<usize>,
}

/// An implicit-GEMM convolution kernel and its tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gemm {
    Fma(ConvCfg),
    Mma(MmaCfg, MmaMode),
}

impl Gemm {
    /// The kernel with its tile, for reports: "fma 64x128x16/8", "coop 64x64x32 w2x2",
    /// "+pipelined" appended to a pipelined form.
    pub(crate) fn label(&self) -> String {
        let (kind, tile, pipelined) = match self {
            Gemm::Fma(c) => ("fma", format!("{}x{}x{}/{}", c.bm, c.bn, c.bk, c.tm), c.pipelined),
            Gemm::Mma(c, mode) => (
                if matches!(mode, MmaMode::Coop { .. }) { "coop" } else { "mma-emulated" },
                format!("{}x{}x{} w{}x{}", c.bm, c.bn, c.bk, c.wm, c.wn),
                c.pipelined,
            ),
        };
        format!("{kind} {tile}{}", if pipelined { "+pipelined" } else { "" })
    }
}

/// The GEMM a convolution with `mg` outputs per group gets without tuning: the handle's MMA plan
/// (its forced tile, else the first of its list that fits) in the handle's form, else the FMA
/// kernel's forced or first fitting tile. Forced tiles take the handle's form where that form
/// of them is valid.
pub(crate) fn default_gemm(limits: &wgpu::Limits, mg: usize, settings: &Settings) -> Gemm {
    let pipe = settings.pipelined;
    let mma = match (settings.conv, settings.mma) {
        (None, Some(plan)) => plan
            .cfg
            .map(|c| if pipe && mma::fits_device(&c.pipelined(), limits, plan.mode) { c.pipelined() } else { c })
            .filter(|c| c.fits(plan.mode))
            .or_else(|| mma::default_cfg(limits, plan.frag, mg <= 16, plan.mode, pipe))
            .map(|c| Gemm::Mma(c, plan.mode)),
        _ => None,
    };
    let forced = settings.conv.map(|c| if pipe && c.pipelined().fits_device(limits, settings.f16_math) { c.pipelined() } else { c });
    mma.unwrap_or_else(|| Gemm::Fma(forced.unwrap_or_else(|| default_cfg(limits, mg <= 16, settings.f16_math, pipe))))
}

/// Whether convolution (not deconvolution) `c` can run as an implicit GEMM with these settings:
/// the GEMMs want more than one input and at least 4 outputs per group.
pub(crate) fn gemm_shaped(c: &Conv, settings: &Settings) -> bool {
    c.in_per_group() > 1 && c.out_per_group() >= 4 && !settings.conv_direct
}

/// How a convolution runs, with the layout its weights were uploaded in.
#[derive(Clone, Copy, Debug)]
enum ConvKernel {
    /// Implicit GEMM (FMA or MMA); weights [group][kpad][mpad], zero padded.
    Gemm { gemm: Gemm, mpad: usize, kpad: usize },
    /// Register-blocked direct kernel (CPU adapters); weights in `rb::pack_weights` rows of `row`.
    Rb { cfg: RbCfg, row: usize },
    /// One output per thread (depthwise-like, deconvolution, inner product); ncnn's layout.
    Direct,
}

impl ConvKernel {
    fn name(&self) -> &'static str {
        match self {
            ConvKernel::Gemm { gemm: Gemm::Fma(c), .. } if c.pipelined => "fma+pipelined",
            ConvKernel::Gemm { gemm: Gemm::Fma(_), .. } => "fma",
            ConvKernel::Gemm { gemm: Gemm::Mma(c, MmaMode::Coop { .. }), .. } if c.pipelined => "coop+pipelined",
            ConvKernel::Gemm { gemm: Gemm::Mma(_, MmaMode::Coop { .. }), .. } => "coop",
            ConvKernel::Gemm { gemm: Gemm::Mma(c, MmaMode::Emulated { .. }), .. } if c.pipelined => "mma-emulated+pipelined",
            ConvKernel::Gemm { gemm: Gemm::Mma(_, MmaMode::Emulated { .. }), .. } => "mma-emulated",
            ConvKernel::Rb { .. } => "rb",
            ConvKernel::Direct => "direct",
        }
    }
}

enum Kind {
    Conv { l: usize, res: Option<Res>, cw: ConvW },
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
    pool: HashMap<u64, Vec<wgpu::Buffer>>,
    pub last_profile: Vec<LayerTime>,
    /// What the tuner measured for this network's convolutions (empty when it did not run).
    pub tuning: Vec<Tuning>,
    /// No profile on stderr (the tuner's probe runs).
    pub(crate) quiet: bool,
}

fn upload(ctx: &DevCtx, data: &[f32], f16: bool, label: &str) -> Result<wgpu::Buffer> {
    let bytes = to_bytes(data, f16);
    let size = (bytes.len() as u64).max(16).div_ceil(4) * 4;
    let d = ctx.device.clone();
    let b = ctx.scoped(label, || {
        d.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    })?;
    let mut padded = bytes;
    padded.resize(size as usize, 0);
    ctx.queue.write_buffer(&b, 0, &padded);
    Ok(b)
}

fn to_bytes(data: &[f32], f16: bool) -> Vec<u8> {
    if f16 {
        let mut v = Vec::with_capacity(data.len() * 2);
        for &x in data {
            v.extend_from_slice(&half::f16::from_f32(x).to_le_bytes());
        }
        v
    } else {
        bytemuck::cast_slice(data).to_vec()
    }
}

/// Upload a convolution's weights in the layout of its kernel: `tuned` (the tuner's pick for
/// this layer), else the default choice for these settings.
fn conv_weights(
    ctx: &DevCtx,
    c: &Conv,
    settings: &Settings,
    deconv: bool,
    prelu: Option<&[f32]>,
    act: Activation,
    tuned: Option<Gemm>,
) -> Result<ConvW> {
    let mg = c.out_per_group();
    let ipg = c.in_per_group();
    let k = ipg * c.kernel_h * c.kernel_w;
    let mut aux = c.bias.clone().unwrap_or_else(|| vec![0.0; c.num_output]);
    if let Some(s) = prelu {
        aux.extend_from_slice(s);
    }
    let aux = upload(ctx, &aux, false, "aux")?;
    // The register-blocked kernel takes any output count (its tile's spare channels are
    // masked); the GEMMs want at least 4 outputs per group.
    let rb_ok = !deconv && ipg > 1 && !settings.conv_direct && settings.conv.is_none() && settings.mma.is_none();
    if let (true, Some(cfg), None) = (rb_ok, settings.rb, tuned) {
        let w = rb::pack_weights(&c.weight, c.group, mg, ipg, c.kernel_h, c.kernel_w, cfg, settings.f16);
        let w = upload(ctx, &w, settings.f16, "conv weights")?;
        let row = cfg.row(c.kernel_w as u32, settings.f16) as usize;
        return Ok(ConvW { w, aux, kernel: ConvKernel::Rb { cfg, row }, act, prelu: prelu.map(|s| s.len()) });
    }
    if !deconv && gemm_shaped(c, settings) {
        let gemm = tuned.unwrap_or_else(|| default_gemm(&ctx.limits, mg, settings));
        let (bm, bk) = match gemm {
            Gemm::Fma(c) => (c.bm, c.bk),
            Gemm::Mma(c, _) => (c.bm, c.bk),
        };
        let mpad = mg.div_ceil(bm as usize) * bm as usize;
        let kpad = k.div_ceil(bk as usize) * bk as usize;
        let mut w = vec![0.0f32; c.group * kpad * mpad];
        for g in 0..c.group {
            for m in 0..mg {
                let src = &c.weight[(g * mg + m) * k..(g * mg + m + 1) * k];
                for (kk, &v) in src.iter().enumerate() {
                    w[(g * kpad + kk) * mpad + m] = v;
                }
            }
        }
        let w = upload(ctx, &w, settings.f16, "conv weights")?;
        Ok(ConvW { w, aux, kernel: ConvKernel::Gemm { gemm, mpad, kpad }, act, prelu: prelu.map(|s| s.len()) })
    } else {
        let w = upload(ctx, &c.weight, settings.f16, "conv weights")?;
        Ok(ConvW { w, aux, kernel: ConvKernel::Direct, act, prelu: prelu.map(|s| s.len()) })
    }
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
    /// Prepare `net`: with `settings.tune`, time the candidate GEMMs of each convolution shape
    /// first ([`tune`]) and run every layer with its shape's fastest.
    pub fn new(ctx: &mut DevCtx, net: Arc<Net>, settings: Settings) -> Result<Prep> {
        let (choices, tuning) = match settings.tune.clone() {
            Some(t) => tune::choose(ctx, &net, &settings, &t)?,
            None => (HashMap::new(), Vec::new()),
        };
        if settings.profile {
            tune::print(&tuning);
        }
        let mut p = Prep::build(ctx, net, settings, &choices)?;
        p.tuning = tuning;
        Ok(p)
    }

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
                    let cw = conv_weights(ctx, c, &settings, false, prelu, act, choices.get(&i).copied())?;
                    let mut bottoms = vec![l.bottoms[0]];
                    if let Some(r) = &res {
                        bottoms.push(r.blob);
                    }
                    steps.push(Step {
                        kind: Kind::Conv { l: i, res, cw },
                        bottoms,
                        tops: vec![out],
                        name: fused_names.join("+"),
                        type_,
                    });
                }
                Op::Deconv(c) => {
                    let cw = conv_weights(ctx, c, &settings, true, None, c.activation, None)?;
                    steps.push(Step { kind: Kind::Deconv { l: i, cw }, bottoms: l.bottoms.clone(), tops: l.tops.clone(), name, type_ });
                }
                Op::InnerProduct { num_output, weight, bias, activation, .. } => {
                    let aux = bias.clone().unwrap_or_else(|| vec![0.0; *num_output]);
                    let cw = ConvW {
                        w: upload(ctx, weight, settings.f16, "inner product weights")?,
                        aux: upload(ctx, &aux, false, "aux")?,
                        kernel: ConvKernel::Direct,
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
                        _ => None,
                    };
                    steps.push(Step { kind: Kind::Layer { l: i, aux }, bottoms: l.bottoms.clone(), tops: l.tops.clone(), name, type_ });
                }
            }
        }
        ctx.check()?;
        Ok(Prep { net, steps, settings, fused_away, pool: HashMap::new(), last_profile: Vec::new(), tuning: Vec::new(), quiet: false })
    }

    /// The kernel of each convolution step ("coop", "mma-emulated", "fma", "rb", "direct"; "+pipelined" appended to a GEMM in that form), in order.
    pub fn conv_kernels(&self) -> Vec<&'static str> {
        self.steps
            .iter()
            .filter_map(|s| match &s.kind {
                Kind::Conv { cw, .. } => Some(cw.kernel.name()),
                _ => None,
            })
            .collect()
    }

    fn es(&self) -> u64 {
        if self.settings.f16 {
            2
        } else {
            4
        }
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
        let mut rec = Rec {
            params: Vec::new(),
            cmds: Vec::new(),
            slots: Vec::new(),
            blobs: vec![None; nb],
            align: (ctx.limits.min_storage_buffer_offset_alignment as usize / 4).max(1),
            uploads: Vec::new(),
            used: Vec::new(),
            es: self.es(),
            maxdim: ctx.limits.max_compute_workgroups_per_dimension,
            max_binding: ctx.limits.max_storage_buffer_binding_size as u64,
            step: 0,
            conv_notes: HashMap::new(),
        };
        let input_map: HashMap<usize, &Tensor> = inputs.iter().map(|(i, t)| (*i, t)).collect();
        for si in 0..self.steps.len() {
            if !needed[si] {
                continue;
            }
            rec.step = si;
            self.record(ctx, &mut rec, si, &input_map)?;
            let s = &self.steps[si];
            for &b in &s.bottoms {
                uses[b] -= 1;
                if uses[b] == 0 {
                    rec.release_blob(b, &mut self.pool);
                }
            }
            for &t in &s.tops {
                if uses[t] == 0 {
                    rec.release_blob(t, &mut self.pool);
                }
            }
        }
        cancel.check()?;
        let result = self.submit(ctx, &mut rec, outputs);
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
        result
    }

    fn submit(&mut self, ctx: &mut DevCtx, rec: &mut Rec, outputs: &[usize]) -> Result<Vec<Tensor>> {
        let dev = ctx.device.clone();
        let es = rec.es;
        // Parameter buffer.
        let pbytes: Vec<u8> = bytemuck::cast_slice(&rec.params).to_vec();
        let psize = (pbytes.len() as u64).max(256);
        let pbuf = ctx.scoped("params", || {
            dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some("params"),
                size: psize,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })?;
        if !pbytes.is_empty() {
            ctx.queue.write_buffer(&pbuf, 0, &pbytes);
        }
        for (buf, bytes) in rec.uploads.drain(..) {
            ctx.queue.write_buffer(&buf, 0, &bytes);
        }
        // Output staging.
        let mut out_ofs = Vec::new();
        let mut total = 0u64;
        for &o in outputs {
            let b = rec.blobs[o].as_ref().ok_or_else(|| Error::new(Code::Internal, format!("output blob {o} was not computed")))?;
            let bytes = (b.shape.len() as u64 * es).div_ceil(4) * 4;
            out_ofs.push((total, bytes));
            total += bytes.div_ceil(256) * 256;
        }
        let profile = self.settings.profile && ctx.features.contains(wgpu::Features::TIMESTAMP_QUERY);
        // One timestamp pair per run of dispatches or of copies within a step.
        let mut runs: Vec<(usize, bool)> = rec.cmds.iter().map(|c| (c.step, matches!(c.work, Work::Copy { .. }))).collect();
        runs.dedup();
        let step_ids: Vec<usize> = runs.iter().map(|r| r.0).collect();
        let nq = (step_ids.len() * 2) as u32;
        let profile = profile && nq > 0 && nq <= 4096;
        let prof_bytes = if profile { nq as u64 * 8 } else { 0 };
        let staging_size = (total + prof_bytes).max(256);
        let staging = ctx.scoped("staging", || {
            dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some("staging"),
                size: staging_size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })?;
        let cmds = std::mem::take(&mut rec.cmds);
        let groups = ctx.scoped("bind groups", || {
            cmds.iter()
                .map(|c| {
                    let Work::Dispatch { pipe, bufs, pofs, plen, .. } = &c.work else { return None };
                    let layout = pipe.get_bind_group_layout(0);
                    let mut entries = vec![wgpu::BindGroupEntry {
                        binding: 0,
                        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                            buffer: &pbuf,
                            offset: *pofs as u64 * 4,
                            size: NonZeroU64::new((*plen).max(1) as u64 * 4),
                        }),
                    }];
                    for (i, b) in bufs.iter().enumerate() {
                        entries.push(wgpu::BindGroupEntry { binding: i as u32 + 1, resource: b.as_entire_binding() });
                    }
                    Some(dev.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout: &layout, entries: &entries }))
                })
                .collect::<Vec<_>>()
        })?;
        let qs = if profile {
            Some(dev.create_query_set(&wgpu::QuerySetDescriptor { label: Some("profile"), ty: wgpu::QueryType::Timestamp, count: nq }))
        } else {
            None
        };
        let resolve = if profile {
            Some(dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some("resolve"),
                size: prof_bytes,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }))
        } else {
            None
        };
        let cb = ctx.scoped("encoding", || {
            let mut enc = dev.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("run") });
            // Consecutive dispatches share a compute pass; a copy ends it. Profiling: one pass per
            // step, timestamps at its start and end (a step of copies gets an empty pass before
            // and after them, so its time still lands between its two timestamps).
            let mut i = 0;
            let mut qi = 0u32;
            while i < cmds.len() {
                let s = cmds[i].step;
                let stamp = |begin: bool, end: bool| {
                    qs.as_ref().map(|qs| wgpu::ComputePassTimestampWrites {
                        query_set: qs,
                        beginning_of_pass_write_index: begin.then_some(qi),
                        end_of_pass_write_index: end.then_some(qi + 1),
                    })
                };
                if let Work::Copy { .. } = cmds[i].work {
                    if qs.is_some() {
                        drop(enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: stamp(true, false) }));
                    }
                    while let Some(Cmd { work: Work::Copy { src, src_ofs, dst, dst_ofs, bytes }, step }) = cmds.get(i) {
                        if qs.is_some() && *step != s {
                            break;
                        }
                        enc.copy_buffer_to_buffer(src, *src_ofs, dst, *dst_ofs, *bytes);
                        i += 1;
                    }
                    if qs.is_some() {
                        drop(enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: stamp(false, true) }));
                    }
                } else {
                    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: stamp(true, true) });
                    while let Some(Cmd { work: Work::Dispatch { pipe, wg, .. }, step }) = cmds.get(i) {
                        if qs.is_some() && *step != s {
                            break;
                        }
                        pass.set_pipeline(pipe);
                        pass.set_bind_group(0, groups[i].as_ref(), &[]);
                        pass.dispatch_workgroups(wg.0, wg.1, wg.2);
                        i += 1;
                    }
                }
                if qs.is_some() {
                    qi += 2;
                }
            }
            if let Some(qs) = &qs {
                enc.resolve_query_set(qs, 0..nq, resolve.as_ref().unwrap(), 0);
                enc.copy_buffer_to_buffer(resolve.as_ref().unwrap(), 0, &staging, total, prof_bytes);
            }
            for (&o, &(ofs, bytes)) in outputs.iter().zip(&out_ofs) {
                let b = rec.blobs[o].as_ref().unwrap();
                enc.copy_buffer_to_buffer(&rec.slots[b.slot].buf, 0, &staging, ofs, bytes);
            }
            enc.finish()
        })?;
        let idx = ctx.queue.submit([cb]);
        ctx.wait(idx)?;
        let (mtx, mrx) = std::sync::mpsc::channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = mtx.send(r);
        });
        let idx = ctx.queue.submit([]);
        ctx.wait(idx)?;
        match mrx.try_recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => bail!(Code::Internal, "reading results back failed: {e}"),
            Err(_) => {
                ctx.check()?;
                bail!(Code::Internal, "reading results back did not complete")
            }
        }
        let view = staging.slice(..).get_mapped_range().map_err(|e| Error::new(Code::Internal, format!("map: {e}")))?;
        let mut out = Vec::new();
        for (&o, &(ofs, _)) in outputs.iter().zip(&out_ofs) {
            let b = rec.blobs[o].as_ref().unwrap();
            let n = b.shape.len();
            let raw = &view[ofs as usize..ofs as usize + n * es as usize];
            let data: Vec<f32> = if es == 2 {
                raw.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect()
            } else {
                raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
            };
            let s = b.shape;
            out.push(Tensor { dims: s.dims, c: s.c, h: s.h, w: s.w, data });
        }
        if profile {
            let period = ctx.queue.get_timestamp_period() as f64;
            let raw = &view[total as usize..(total + prof_bytes) as usize];
            let ts: Vec<u64> = raw.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
            self.last_profile = step_ids
                .iter()
                .enumerate()
                .map(|(k, &s)| {
                    let (flop, kernel) = rec.conv_notes.get(&s).copied().unwrap_or((0.0, ""));
                    LayerTime {
                        layer: self.steps[s].name.clone(),
                        kind: self.steps[s].type_.clone(),
                        ms: ts[2 * k + 1].wrapping_sub(ts[2 * k]) as f64 * period / 1e6,
                        flop,
                        kernel: kernel.to_string(),
                    }
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
        drop(view);
        staging.unmap();
        Ok(out)
    }

    fn record(&mut self, ctx: &mut DevCtx, rec: &mut Rec, si: usize, inputs: &HashMap<usize, &Tensor>) -> Result<()> {
        let net = self.net.clone();
        let f16 = self.settings.f16;
        let es = rec.es;
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
        let lname = &step.name;
        let pk = |n: &str| format!("{n}:{}", if f16 { "f16" } else { "f32" });
        match &step.kind {
            Kind::Conv { l, res, cw } => {
                let Op::Conv(c) = &net.layers[*l].op else { unreachable!() };
                let (os, pads) = conv_shape(c, ins[0], lname)?;
                let x = rec.buf_of(step.bottoms[0]);
                let mut fuse_res = None;
                if let Some(r) = res {
                    if ins[1] == os {
                        fuse_res = Some((rec.buf_of(r.blob), r.c_conv, r.c_res));
                    }
                }
                let out = if res.is_some() && fuse_res.is_none() {
                    rec.alloc_temp(os, &mut self.pool, ctx)?
                } else {
                    rec.alloc_blob(step.tops[0], os, &mut self.pool, ctx)?
                };
                let (act, aa, ab) = act_code(cw.act);
                let mut flags = 0u32;
                if let Some(n) = cw.prelu {
                    flags |= kernels::EPI_PRELU;
                    if n > 1 {
                        flags |= kernels::EPI_PRELU_PER_CHANNEL;
                    }
                }
                let (rbuf, ca, cb) = match &fuse_res {
                    Some((b, ca, cb)) => {
                        flags |= kernels::EPI_RESIDUAL;
                        (b.clone(), *ca, *cb)
                    }
                    None => (x.clone(), 1.0, 0.0),
                };
                let mg = c.out_per_group();
                let ipg = c.in_per_group();
                let mut p = vec![
                    ipg as u32,
                    ins[0].h as u32,
                    ins[0].w as u32,
                    c.num_output as u32,
                    os.h as u32,
                    os.w as u32,
                    c.kernel_h as u32,
                    c.kernel_w as u32,
                    c.stride_h as u32,
                    c.stride_w as u32,
                    c.dilation_h as u32,
                    c.dilation_w as u32,
                    pads.2 as u32,
                    pads.0 as u32,
                    fb(c.pad_value),
                    act,
                    fb(aa),
                    fb(ab),
                    flags,
                    fb(ca),
                    fb(cb),
                    mg as u32,
                ];
                let bufs = vec![x, cw.w.clone(), cw.aux.clone(), rbuf, out.clone()];
                let conv_flop = 2.0 * (os.c * os.h * os.w) as f64 * (ipg * c.kernel_h * c.kernel_w) as f64;
                rec.conv_notes.insert(si, (conv_flop, cw.kernel.name()));
                // Params from 22: GEMMs mpad, K, kpad and the gather table; the register-blocked
                // kernel its weight row length.
                let grid = match cw.kernel {
                    ConvKernel::Gemm { gemm, mpad, kpad } => {
                        p.extend_from_slice(&[mpad as u32, (ipg * c.kernel_h * c.kernel_w) as u32, kpad as u32]);
                        p.extend(kernels::gather_table(ipg, c.kernel_h, c.kernel_w, c.dilation_h, c.dilation_w, ins[0].h, ins[0].w));
                        let (pipe, bm, bn) = match gemm {
                            Gemm::Fma(cfg) => {
                                let key = format!("conv:{cfg:?}:{}", self.settings.f16_math);
                                let acc16 = self.settings.f16_math;
                                (ctx.pipeline(&pk(&key), || kernels::conv_gemm(f16, acc16, cfg))?, cfg.bm, cfg.bn)
                            }
                            Gemm::Mma(cfg, mode) => {
                                let key = format!("conv_mma:{cfg:?}:{mode:?}");
                                (ctx.pipeline(&pk(&key), || mma::conv_mma(f16, cfg, mode))?, cfg.bm, cfg.bn)
                            }
                        };
                        Some((pipe, mg.div_ceil(bm as usize) * (os.h * os.w).div_ceil(bn as usize)))
                    }
                    ConvKernel::Rb { cfg, row } => {
                        p.push(row as u32);
                        let sh = RbShape { kw: c.kernel_w as u32, sw: c.stride_w as u32, dw: c.dilation_w as u32, act, flags };
                        let key = format!("conv_rb:{cfg:?}:{sh:?}");
                        Some((ctx.pipeline(&pk(&key), || rb::conv_rb(f16, cfg, sh))?, rb::tiles(cfg, mg, os.h, os.w)))
                    }
                    ConvKernel::Direct => None,
                };
                if let Some((pipe, tiles)) = grid {
                    let (gx, gy) = fold(tiles, rec.maxdim)?;
                    if c.group as u32 > rec.maxdim {
                        bail!(Code::ModelInvalid, "layer {lname}: too many groups");
                    }
                    rec.cmd(pipe, bufs, &p, (gx, gy, c.group as u32));
                } else {
                    p[0] = os.len() as u32;
                    p.push(ipg as u32);
                    let pipe = ctx.pipeline(&pk("conv_direct"), || kernels::conv_direct(f16))?;
                    rec.ew(pipe, bufs, &p, os.len())?;
                }
                if let (Some(r), None) = (res, &fuse_res) {
                    // Shapes differ: fall back to a broadcasting binary op.
                    let rs = ins[1];
                    let (o2, sa, sb) = broadcast(os, rs, lname)?;
                    let dst = rec.alloc_blob(step.tops[0], o2, &mut self.pool, ctx)?;
                    let rb = rec.buf_of(r.blob);
                    let p = bin_params(o2, sa, sb, 0, r.c_conv, r.c_res, None);
                    let pipe = ctx.pipeline(&pk("binary"), || kernels::binary(f16))?;
                    rec.ew(pipe, vec![out, rb, dst], &p, o2.len())?;
                }
            }
            Kind::Deconv { l, cw } => {
                let Op::Deconv(c) = &net.layers[*l].op else { unreachable!() };
                let (os, cut_t, cut_l) = deconv_shape(c, ins[0]);
                let x = rec.buf_of(step.bottoms[0]);
                let out = rec.alloc_blob(step.tops[0], os, &mut self.pool, ctx)?;
                let (act, aa, ab) = act_code(cw.act);
                let p = vec![
                    os.len() as u32,
                    ins[0].h as u32,
                    ins[0].w as u32,
                    c.num_output as u32,
                    os.h as u32,
                    os.w as u32,
                    c.kernel_h as u32,
                    c.kernel_w as u32,
                    c.stride_h as u32,
                    c.stride_w as u32,
                    c.dilation_h as u32,
                    c.dilation_w as u32,
                    cut_t as u32,
                    cut_l as u32,
                    0,
                    act,
                    fb(aa),
                    fb(ab),
                    0,
                    0,
                    0,
                    c.out_per_group() as u32,
                    c.in_per_group() as u32,
                ];
                let pipe = ctx.pipeline(&pk("deconv"), || kernels::deconv(f16))?;
                rec.ew(pipe, vec![x.clone(), cw.w.clone(), cw.aux.clone(), x, out], &p, os.len())?;
            }
            Kind::Inner { l, cw } => {
                let Op::InnerProduct { num_output, num_input, .. } = &net.layers[*l].op else { unreachable!() };
                if ins[0].len() != *num_input {
                    bail!(Code::ModelInvalid, "layer {lname}: inner product wants {num_input} inputs, got {}", ins[0].len());
                }
                let os = Shape { dims: 1, c: 1, h: 1, w: *num_output };
                let x = rec.buf_of(step.bottoms[0]);
                let out = rec.alloc_blob(step.tops[0], os, &mut self.pool, ctx)?;
                let (act, aa, ab) = act_code(cw.act);
                let mut p = vec![0u32; 21];
                p[0] = *num_output as u32;
                p[1] = *num_input as u32;
                p[3] = *num_output as u32;
                p[15] = act;
                p[16] = fb(aa);
                p[17] = fb(ab);
                let pipe = ctx.pipeline(&pk("inner"), || kernels::inner(f16))?;
                rec.ew(pipe, vec![x.clone(), cw.w.clone(), cw.aux.clone(), x, out], &p, os.len())?;
            }
            Kind::PshufAdd { ps, interp, ps_first } => {
                let Op::PixelShuffle { factor, mode } = &net.layers[*ps].op else { unreachable!() };
                let Op::Interp(ip) = &net.layers[*interp].op else { unreachable!() };
                let (pos, pp) = pshuf_params(ins[0], *factor, *mode, lname)?;
                let (uos, mut up) = resample_params(ip, ins[1], lname)?;
                let x = rec.buf_of(step.bottoms[0]);
                let u = rec.buf_of(step.bottoms[1]);
                if pos == uos {
                    let out = rec.alloc_blob(step.tops[0], pos, &mut self.pool, ctx)?;
                    up[1] = pos.c as u32;
                    up[7] = (*factor as u32) | (((*mode != 0) as u32) << 16);
                    let pipe = ctx.pipeline(&pk("pshuf_add"), || kernels::pshuf_add(f16))?;
                    rec.ew(pipe, vec![x, u, out], &up, pos.len())?;
                } else {
                    // Shapes differ (a broadcasting add): the three kernels one after another.
                    let t1 = rec.alloc_temp(pos, &mut self.pool, ctx)?;
                    let pipe = ctx.pipeline(&pk("pshuf"), || kernels::pshuf(f16))?;
                    rec.ew(pipe, vec![x, t1.clone()], &pp, pos.len())?;
                    let t2 = rec.alloc_temp(uos, &mut self.pool, ctx)?;
                    let pipe = ctx.pipeline(&pk("resample"), || kernels::resample(f16))?;
                    rec.ew(pipe, vec![u, t2.clone()], &up, uos.len())?;
                    let (a, b, sa_shape, sb_shape) = if *ps_first { (t1, t2, pos, uos) } else { (t2, t1, uos, pos) };
                    let (os, sa, sb) = broadcast(sa_shape, sb_shape, lname)?;
                    let out = rec.alloc_blob(step.tops[0], os, &mut self.pool, ctx)?;
                    let p = bin_params(os, sa, sb, 0, 1.0, 1.0, None);
                    let pipe = ctx.pipeline(&pk("binary"), || kernels::binary(f16))?;
                    rec.ew(pipe, vec![a, b, out], &p, os.len())?;
                }
            }
            Kind::Layer { l, aux } => {
                let layer = &net.layers[*l];
                let aux = aux.clone().unwrap_or_else(|| ctx.dummy.clone());
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
                            let b = rec.alloc_blob(t, s, &mut self.pool, ctx)?;
                            let mut bytes = to_bytes(&tensor.data, f16);
                            bytes.resize(bytes.len().div_ceil(4) * 4, 0);
                            rec.uploads.push((b, bytes));
                        }
                    }
                    Op::Split | Op::Noop => {
                        for &t in &step.tops {
                            rec.alias(t, step.bottoms[0], ins[0]);
                        }
                    }
                    Op::Reshape { w, h, c } => {
                        let s = reshape_shape(ins[0], *w, *h, *c, lname)?;
                        rec.alias(step.tops[0], step.bottoms[0], s);
                    }
                    Op::Flatten => {
                        let s = Shape { dims: 1, c: 1, h: 1, w: ins[0].len() };
                        rec.alias(step.tops[0], step.bottoms[0], s);
                    }
                    Op::ReLU { .. } | Op::PReLU { .. } | Op::Sigmoid | Op::TanH | Op::Clip { .. } | Op::ChannelAffine { .. } => {
                        let s = ins[0];
                        let (op, a, b, n) = match &layer.op {
                            Op::ReLU { slope } => (0, *slope, 0.0, 0),
                            Op::PReLU { slope } => (1, 0.0, 0.0, slope.len()),
                            Op::Sigmoid => (2, 0.0, 0.0, 0),
                            Op::TanH => (3, 0.0, 0.0, 0),
                            Op::Clip { min, max } => (4, *min, *max, 0),
                            Op::ChannelAffine { scale, .. } => (5, 0.0, 0.0, scale.len()),
                            _ => unreachable!(),
                        };
                        let x = rec.buf_of(step.bottoms[0]);
                        let out = rec.alloc_blob(step.tops[0], s, &mut self.pool, ctx)?;
                        let p = [s.len() as u32, s.plane().max(1) as u32, op, fb(a), fb(b), n as u32];
                        let pipe = ctx.pipeline(&pk("unary"), || kernels::unary(f16))?;
                        rec.ew(pipe, vec![x, aux, out], &p, s.len())?;
                    }
                    Op::BinaryOp { op, scalar } => {
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
                        let pipe = ctx.pipeline(&pk("binary"), || kernels::binary(f16))?;
                        let a = rec.buf_of(step.bottoms[0]);
                        if let (Some(v), 1) = (scalar, step.bottoms.len()) {
                            let s = ins[0];
                            let out = rec.alloc_blob(step.tops[0], s, &mut self.pool, ctx)?;
                            let full = [s.h * s.w, s.w, 1];
                            let p = bin_params(s, full, [0, 0, 0], code, 1.0, 1.0, Some(*v));
                            rec.ew(pipe, vec![a.clone(), a, out], &p, s.len())?;
                        } else {
                            if step.bottoms.len() != 2 {
                                bail!(Code::ModelInvalid, "layer {lname}: BinaryOp needs two inputs");
                            }
                            let (os, sa, sb) = broadcast(ins[0], ins[1], lname)?;
                            let b = rec.buf_of(step.bottoms[1]);
                            let out = rec.alloc_blob(step.tops[0], os, &mut self.pool, ctx)?;
                            let p = bin_params(os, sa, sb, code, 1.0, 1.0, None);
                            rec.ew(pipe, vec![a, b, out], &p, os.len())?;
                        }
                    }
                    Op::Eltwise { op, coeffs } => {
                        if step.bottoms.len() < 2 {
                            bail!(Code::ModelInvalid, "layer {lname}: Eltwise needs two or more inputs");
                        }
                        let code = match op {
                            EltwiseKind::Sum => 0,
                            EltwiseKind::Prod => 2,
                            EltwiseKind::Max => 4,
                        };
                        let coef = |i: usize| if *op == EltwiseKind::Sum { coeffs.get(i).copied().unwrap_or(1.0) } else { 1.0 };
                        let pipe = ctx.pipeline(&pk("binary"), || kernels::binary(f16))?;
                        let n = step.bottoms.len();
                        let mut acc = rec.buf_of(step.bottoms[0]);
                        let mut acc_shape = ins[0];
                        for i in 1..n {
                            let (os, sa, sb) = broadcast(acc_shape, ins[i], lname)?;
                            let dst = if i == n - 1 {
                                rec.alloc_blob(step.tops[0], os, &mut self.pool, ctx)?
                            } else {
                                rec.alloc_temp(os, &mut self.pool, ctx)?
                            };
                            let ca = if i == 1 { coef(0) } else { 1.0 };
                            let p = bin_params(os, sa, sb, code, ca, coef(i), None);
                            rec.ew(pipe.clone(), vec![acc, rec.buf_of(step.bottoms[i]), dst.clone()], &p, os.len())?;
                            acc = dst;
                            acc_shape = os;
                        }
                    }
                    Op::PixelShuffle { factor, mode } => {
                        let (os, p) = pshuf_params(ins[0], *factor, *mode, lname)?;
                        let x = rec.buf_of(step.bottoms[0]);
                        let out = rec.alloc_blob(step.tops[0], os, &mut self.pool, ctx)?;
                        let pipe = ctx.pipeline(&pk("pshuf"), || kernels::pshuf(f16))?;
                        rec.ew(pipe, vec![x, out], &p, os.len())?;
                    }
                    Op::Interp(ip) => {
                        let (os, p) = resample_params(ip, ins[0], lname)?;
                        let x = rec.buf_of(step.bottoms[0]);
                        let out = rec.alloc_blob(step.tops[0], os, &mut self.pool, ctx)?;
                        let pipe = ctx.pipeline(&pk("resample"), || kernels::resample(f16))?;
                        rec.ew(pipe, vec![x, out], &p, os.len())?;
                    }
                    Op::Concat { axis } => {
                        let s0 = ins[0];
                        let d = s0.dims as i32;
                        let ax = if *axis < 0 { axis + d } else { *axis };
                        if ax < 0 || ax >= d {
                            bail!(Code::ModelInvalid, "layer {lname}: concat axis {axis} of a {d}-D blob");
                        }
                        // Position in (c, h, w).
                        let pos = (3 - d + ax) as usize;
                        let dim = |s: &Shape| [s.c, s.h, s.w][pos];
                        let mut os = s0;
                        let mut total = 0;
                        for s in &ins {
                            let mut a = [s.c, s.h, s.w];
                            let mut b = [s0.c, s0.h, s0.w];
                            a[pos] = 0;
                            b[pos] = 0;
                            if s.dims != s0.dims || a != b {
                                bail!(Code::ModelInvalid, "layer {lname}: concat of mismatched blobs");
                            }
                            total += dim(s);
                        }
                        match pos {
                            0 => os.c = total,
                            1 => os.h = total,
                            _ => os.w = total,
                        }
                        let out = rec.alloc_blob(step.tops[0], os, &mut self.pool, ctx)?;
                        let pipe = ctx.pipeline(&pk("copy3"), || kernels::copy3(f16))?;
                        let dst_strides = [os.h * os.w, os.w, 1];
                        let mut ofs = 0;
                        for (i, s) in ins.iter().enumerate() {
                            let x = rec.buf_of(step.bottoms[i]);
                            let (dst_ofs, bytes) = ((ofs * dst_strides[pos]) as u64 * es, s.len() as u64 * es);
                            if pos == 0 && dst_ofs % 4 == 0 && bytes % 4 == 0 {
                                // Along channels each input is one contiguous run of the output.
                                rec.copy(x, 0, out.clone(), dst_ofs, bytes);
                            } else {
                                let p = copy_params(*s, 0, [s.h * s.w, s.w, 1], ofs * dst_strides[pos], dst_strides);
                                rec.ew(pipe.clone(), vec![x, out.clone()], &p, s.len())?;
                            }
                            ofs += dim(s);
                        }
                    }
                    Op::Crop(cr) => {
                        let refs = if ins.len() > 1 { Some(ins[1]) } else { None };
                        let (os, off) = crop_region(cr, ins[0], refs, lname)?;
                        let s = ins[0];
                        let x = rec.buf_of(step.bottoms[0]);
                        let out = rec.alloc_blob(step.tops[0], os, &mut self.pool, ctx)?;
                        let src_ofs = (off[0] * s.h + off[1]) * s.w + off[2];
                        let p = copy_params(os, src_ofs, [s.h * s.w, s.w, 1], 0, [os.h * os.w, os.w, 1]);
                        let pipe = ctx.pipeline(&pk("copy3"), || kernels::copy3(f16))?;
                        rec.ew(pipe, vec![x, out], &p, os.len())?;
                    }
                    Op::Permute { order_type } => {
                        let s = ins[0];
                        let (hw, w1) = (s.h * s.w, 1usize);
                        let (os, src) = match (s.dims, order_type) {
                            (1, _) | (_, 0) => (s, [hw, s.w, w1]),
                            (2, 1) => (Shape { dims: 2, c: 1, h: s.w, w: s.h }, [0, w1, s.w]),
                            (3, 1) => (Shape::d3(s.c, s.w, s.h), [hw, w1, s.w]),
                            (3, 2) => (Shape::d3(s.h, s.c, s.w), [s.w, hw, w1]),
                            (3, 3) => (Shape::d3(s.h, s.w, s.c), [s.w, w1, hw]),
                            (3, 4) => (Shape::d3(s.w, s.c, s.h), [w1, hw, s.w]),
                            (3, 5) => (Shape::d3(s.w, s.h, s.c), [w1, s.w, hw]),
                            _ => bail!(Code::ModelInvalid, "layer {lname}: Permute order {order_type} of a {}-D blob", s.dims),
                        };
                        let x = rec.buf_of(step.bottoms[0]);
                        let out = rec.alloc_blob(step.tops[0], os, &mut self.pool, ctx)?;
                        let p = copy_params(os, 0, src, 0, [os.h * os.w, os.w, 1]);
                        let pipe = ctx.pipeline(&pk("copy3"), || kernels::copy3(f16))?;
                        rec.ew(pipe, vec![x, out], &p, os.len())?;
                    }
                    Op::Softmax { axis } => {
                        let s = ins[0];
                        let d = s.dims as i32;
                        let ax = if *axis < 0 { axis + d } else { *axis };
                        if ax < 0 || ax >= d {
                            bail!(Code::ModelInvalid, "layer {lname}: softmax axis {axis} of a {d}-D blob");
                        }
                        let pos = (3 - d + ax) as usize;
                        let dimsv = [s.c, s.h, s.w];
                        let len = dimsv[pos];
                        let inner: usize = dimsv[pos + 1..].iter().product();
                        let lines = s.len() / len.max(1);
                        let x = rec.buf_of(step.bottoms[0]);
                        let out = rec.alloc_blob(step.tops[0], s, &mut self.pool, ctx)?;
                        let p = [lines as u32, len as u32, inner.max(1) as u32];
                        let pipe = ctx.pipeline(&pk("softmax"), || kernels::softmax(f16))?;
                        rec.ew(pipe, vec![x, out], &p, lines)?;
                    }
                    Op::Pooling(pl) => {
                        let s = ins[0];
                        let g = pool_geometry(pl, s, lname)?;
                        let x = rec.buf_of(step.bottoms[0]);
                        let out = rec.alloc_blob(step.tops[0], g.out, &mut self.pool, ctx)?;
                        let n = g.out.len();
                        let p = [
                            n as u32,
                            s.c as u32,
                            s.h as u32,
                            s.w as u32,
                            g.oh as u32,
                            g.ow as u32,
                            g.kh as u32,
                            g.kw as u32,
                            g.sh as u32,
                            g.sw as u32,
                            g.pt as u32,
                            g.pl as u32,
                            (pl.kind == PoolKind::Avg) as u32,
                            g.include_pad as u32,
                            g.hi_y as i32 as u32,
                            g.hi_x as i32 as u32,
                            g.adaptive as u32,
                            g.lo_y as i32 as u32,
                            g.lo_x as i32 as u32,
                        ];
                        let pipe = ctx.pipeline(&pk("pool"), || kernels::pool(f16))?;
                        rec.ew(pipe, vec![x, out], &p, n)?;
                    }
                    Op::Warp => {
                        let (os, p, n) = crate::warp::plan(ins[0], ins[1], lname)?;
                        let (img, flow) = (rec.buf_of(step.bottoms[0]), rec.buf_of(step.bottoms[1]));
                        let out = rec.alloc_blob(step.tops[0], os, &mut self.pool, ctx)?;
                        let pipe = ctx.pipeline(&pk("warp"), || crate::warp::shader(f16))?;
                        rec.ew(pipe, vec![img, flow, out], &p, n)?;
                    }
                    Op::Custom { kind, .. } => {
                        bail!(Code::ModelInvalid, "layer {lname}: custom layer '{kind}' is not supported by the GPU backend")
                    }
                    Op::Conv(_) | Op::Deconv(_) | Op::InnerProduct { .. } => unreachable!(),
                }
            }
        }
        let _ = es;
        Ok(())
    }
}

/// Output shape and kernel parameters of a PixelShuffle.
fn pshuf_params(s: Shape, r: usize, mode: i32, lname: &str) -> Result<(Shape, Vec<u32>)> {
    if s.dims != 3 || r == 0 || s.c % (r * r) != 0 {
        bail!(Code::ModelInvalid, "layer {lname}: PixelShuffle of {} channels by {r}", s.c);
    }
    let os = Shape::d3(s.c / (r * r), s.h * r, s.w * r);
    Ok((os, vec![os.len() as u32, os.c as u32, os.h as u32, os.w as u32, r as u32, (mode != 0) as u32]))
}

/// Output shape and kernel parameters (tap tables) of an Interp.
fn resample_params(ip: &lucent_core::ncnn::Interp, s: Shape, lname: &str) -> Result<(Shape, Vec<u32>)> {
    if s.dims != 3 {
        bail!(Code::ModelInvalid, "layer {lname}: Interp of a {}-D blob is not supported", s.dims);
    }
    let (oh, ow) = interp_size(ip, s);
    if oh == 0 || ow == 0 {
        bail!(Code::ModelInvalid, "layer {lname}: Interp to an empty size");
    }
    let os = Shape::d3(s.c, oh, ow);
    let sized = ip.output_w > 0 && ip.output_h > 0;
    let (taps, xt) = interp_taps(ip.resize_type, s.w, ow, ip.width_scale, sized, ip.align_corner, lname)?;
    let (_, yt) = interp_taps(ip.resize_type, s.h, oh, ip.height_scale, sized, ip.align_corner, lname)?;
    let mut p = vec![os.len() as u32, s.c as u32, s.h as u32, s.w as u32, oh as u32, ow as u32, taps, 0];
    for t in xt.iter().chain(yt.iter()) {
        p.extend_from_slice(&t.0);
        p.extend(t.1.iter().map(|&v| fb(v)));
    }
    Ok((os, p))
}

fn bin_params(os: Shape, sa: [usize; 3], sb: [usize; 3], op: u32, ca: f32, cb: f32, scalar: Option<f32>) -> Vec<u32> {
    vec![
        os.len() as u32,
        os.c as u32,
        os.h as u32,
        os.w as u32,
        sa[0] as u32,
        sa[1] as u32,
        sa[2] as u32,
        sb[0] as u32,
        sb[1] as u32,
        sb[2] as u32,
        op,
        fb(ca),
        fb(cb),
        scalar.is_some() as u32,
        fb(scalar.unwrap_or(0.0)),
    ]
}

fn copy_params(region: Shape, src_ofs: usize, src: [usize; 3], dst_ofs: usize, dst: [usize; 3]) -> Vec<u32> {
    vec![
        region.len() as u32,
        region.c as u32,
        region.h as u32,
        region.w as u32,
        src_ofs as u32,
        src[0] as u32,
        src[1] as u32,
        src[2] as u32,
        dst_ofs as u32,
        dst[0] as u32,
        dst[1] as u32,
        dst[2] as u32,
    ]
}

/// Broadcast two blobs: output shape and element strides (c, h, w) of each operand.
/// Equal ranks broadcast axes of size 1; a vector against a 3-D blob is per channel when its
/// length equals the channel count (ncnn), otherwise it aligns with the last axis; a vector
/// against a matrix is per row when its length equals the row count; a matrix against a 3-D blob
/// aligns with (h, w).
pub(crate) fn broadcast(a: Shape, b: Shape, lname: &str) -> Result<(Shape, [usize; 3], [usize; 3])> {
    let lift = |s: Shape, big: Shape| -> [usize; 3] {
        if s.dims == big.dims {
            return [s.c, s.h, s.w];
        }
        match (s.dims, big.dims) {
            (1, 3) if s.w == big.c && s.w != 1 => [s.w, 1, 1],
            (1, 2) if s.w == big.h && s.w != 1 => [1, s.w, 1],
            (1, _) => [1, 1, s.w],
            (2, 3) => [1, s.h, s.w],
            _ => [s.c, s.h, s.w],
        }
    };
    let big = if a.dims >= b.dims { a } else { b };
    let la = lift(a, big);
    let lb = lift(b, big);
    let mut o = [0usize; 3];
    for i in 0..3 {
        o[i] = if la[i] == lb[i] || lb[i] == 1 {
            la[i]
        } else if la[i] == 1 {
            lb[i]
        } else {
            bail!(Code::ModelInvalid, "layer {lname}: cannot broadcast {:?} with {:?}", a, b)
        };
    }
    let strides = |l: [usize; 3]| {
        let full = [l[1] * l[2], l[2], 1];
        let mut s = [0usize; 3];
        for i in 0..3 {
            s[i] = if l[i] == 1 && o[i] != 1 { 0 } else { full[i] };
        }
        s
    };
    let os = Shape { dims: big.dims, c: o[0], h: o[1], w: o[2] };
    Ok((os, strides(la), strides(lb)))
}

/// Output shape of a convolution and its resolved (left, right, top, bottom) padding.
pub(crate) fn conv_shape(c: &Conv, s: Shape, lname: &str) -> Result<(Shape, (usize, usize, usize, usize))> {
    if s.dims != 3 || s.c != c.num_input {
        bail!(Code::ModelInvalid, "layer {lname}: convolution wants {} channels, got shape {:?}", c.num_input, s);
    }
    let kew = c.dilation_w * (c.kernel_w - 1) + 1;
    let keh = c.dilation_h * (c.kernel_h - 1) + 1;
    let pads = c.pad.resolve(s.w, s.h, kew, keh, c.stride_w, c.stride_h);
    let wp = s.w + pads.0 + pads.1;
    let hp = s.h + pads.2 + pads.3;
    if wp < kew || hp < keh {
        bail!(Code::ModelInvalid, "layer {lname}: input {}x{} smaller than the kernel", s.w, s.h);
    }
    Ok((Shape::d3(c.num_output, (hp - keh) / c.stride_h + 1, (wp - kew) / c.stride_w + 1), pads))
}

/// Output shape of a deconvolution and the (top, left) cut applied to the full output.
pub(crate) fn deconv_shape(c: &Conv, s: Shape) -> (Shape, usize, usize) {
    let kew = c.dilation_w * (c.kernel_w - 1) + 1;
    let keh = c.dilation_h * (c.kernel_h - 1) + 1;
    let fw = (s.w - 1) * c.stride_w + kew + c.output_pad_right;
    let fh = (s.h - 1) * c.stride_h + keh + c.output_pad_bottom;
    match c.pad {
        Padding::Explicit { left, right, top, bottom } if left + right + top + bottom > 0 => {
            (Shape::d3(c.num_output, fh.saturating_sub(top + bottom), fw.saturating_sub(left + right)), top, left)
        }
        Padding::SameUpper | Padding::SameLower if c.output_w > 0 && c.output_h > 0 => {
            let wc = fw.saturating_sub(c.output_w);
            let hc = fh.saturating_sub(c.output_h);
            let (t, l) = if c.pad == Padding::SameUpper { (hc / 2, wc / 2) } else { (hc - hc / 2, wc - wc / 2) };
            (Shape::d3(c.num_output, fh - hc, fw - wc), t, l)
        }
        _ => (Shape::d3(c.num_output, fh, fw), 0, 0),
    }
}

fn reshape_shape(s: Shape, w: i32, h: i32, c: i32, lname: &str) -> Result<Shape> {
    let total = s.len();
    let keep = |v: i32, from: usize| if v == 0 { from as i32 } else { v };
    let (dims, mut v) = if c != -233 {
        (3u8, vec![keep(c, s.c), keep(h, s.h), keep(w, s.w)])
    } else if h != -233 {
        (2, vec![keep(h, s.h), keep(w, s.w)])
    } else {
        (1, vec![keep(w, s.w)])
    };
    let known: usize = v.iter().filter(|&&x| x > 0).map(|&x| x as usize).product();
    if let Some(i) = v.iter().position(|&x| x < 0) {
        if known == 0 || total % known != 0 {
            bail!(Code::ModelInvalid, "layer {lname}: cannot reshape {total} elements");
        }
        v[i] = (total / known) as i32;
    }
    let v: Vec<usize> = v.iter().map(|&x| x as usize).collect();
    let out = match dims {
        1 => Shape { dims: 1, c: 1, h: 1, w: v[0] },
        2 => Shape { dims: 2, c: 1, h: v[0], w: v[1] },
        _ => Shape::d3(v[0], v[1], v[2]),
    };
    if out.len() != total {
        bail!(Code::ModelInvalid, "layer {lname}: reshape of {total} elements to {:?}", out);
    }
    Ok(out)
}

fn interp_size(ip: &lucent_core::ncnn::Interp, s: Shape) -> (usize, usize) {
    if ip.output_h > 0 && ip.output_w > 0 {
        (ip.output_h, ip.output_w)
    } else {
        ((s.h as f32 * ip.height_scale) as usize, (s.w as f32 * ip.width_scale) as usize)
    }
}

type Taps = Vec<([u32; 4], [f32; 4])>;

/// Source indices and weights of each output position along one axis, as ncnn's Interp does it.
pub(crate) fn interp_taps(kind: i32, n_in: usize, n_out: usize, scale: f32, sized: bool, align: bool, lname: &str) -> Result<(u32, Taps)> {
    let last = n_in as i64 - 1;
    let clamp = |i: i64| i.clamp(0, last) as u32;
    let mut v = Vec::with_capacity(n_out);
    match kind {
        1 => {
            let s = if sized { n_in as f32 / n_out as f32 } else { 1.0 / scale };
            for o in 0..n_out {
                let i = ((o as f32 * s) as i64).min(last);
                v.push(([i.max(0) as u32, 0, 0, 0], [1.0, 0.0, 0.0, 0.0]));
            }
            Ok((1, v))
        }
        2 | 3 => {
            let sc = if align && n_out > 1 { (n_in as f64 - 1.0) / (n_out as f64 - 1.0) } else { n_in as f64 / n_out as f64 };
            for o in 0..n_out {
                let mut fx = if align { (o as f64 * sc) as f32 } else { ((o as f64 + 0.5) * sc - 0.5) as f32 };
                let mut sx = fx.floor() as i64;
                fx -= sx as f32;
                if kind == 2 {
                    if n_in == 1 {
                        v.push(([0, 0, 0, 0], [1.0, 0.0, 0.0, 0.0]));
                        continue;
                    }
                    if sx < 0 {
                        sx = 0;
                        fx = 0.0;
                    }
                    if sx >= last {
                        sx = last - 1;
                        fx = 1.0;
                    }
                    v.push(([sx as u32, sx as u32 + 1, 0, 0], [1.0 - fx, fx, 0.0, 0.0]));
                } else {
                    let a = -0.75f32;
                    let x0 = fx + 1.0;
                    let x1 = fx;
                    let x2 = 1.0 - fx;
                    let c0 = ((a * x0 - 5.0 * a) * x0 + 8.0 * a) * x0 - 4.0 * a;
                    let c1 = ((a + 2.0) * x1 - (a + 3.0)) * x1 * x1 + 1.0;
                    let c2 = ((a + 2.0) * x2 - (a + 3.0)) * x2 * x2 + 1.0;
                    let c3 = 1.0 - c0 - c1 - c2;
                    v.push(([clamp(sx - 1), clamp(sx), clamp(sx + 1), clamp(sx + 2)], [c0, c1, c2, c3]));
                }
            }
            Ok((if kind == 2 { 2 } else { 4 }, v))
        }
        t => bail!(Code::ModelInvalid, "layer {lname}: Interp resize type {t} is not supported"),
    }
}

/// Region of a Crop: output shape and (c, h, w) offsets into the input.
pub(crate) fn crop_region(cr: &lucent_core::ncnn::Crop, s: Shape, refs: Option<Shape>, lname: &str) -> Result<(Shape, [usize; 3])> {
    let d = s.dims as i32;
    let size = [s.c as i64, s.h as i64, s.w as i64];
    let mut off = [0i64; 3];
    let mut len = size;
    if let Some(r) = refs {
        off[2] = cr.woffset as i64;
        len[2] = r.w as i64;
        if d >= 2 {
            off[1] = cr.hoffset as i64;
            len[1] = r.h as i64;
        }
        if d == 3 {
            off[0] = cr.coffset as i64;
            len[0] = if r.dims == 3 { r.c as i64 } else { size[0] };
        }
    } else if !cr.starts.is_empty() && !cr.ends.is_empty() {
        let n = if cr.axes.is_empty() { d as usize } else { cr.axes.len() };
        if cr.starts.len() < n || cr.ends.len() < n {
            bail!(Code::ModelInvalid, "layer {lname}: crop has fewer starts/ends than axes");
        }
        for i in 0..n {
            let ax = if cr.axes.is_empty() { i as i32 } else { cr.axes[i] };
            let ax = if ax < 0 { ax + d } else { ax };
            if ax < 0 || ax >= d {
                bail!(Code::ModelInvalid, "layer {lname}: crop axis out of range");
            }
            let pos = (3 - d + ax) as usize;
            let n = size[pos];
            let mut st = cr.starts[i] as i64;
            let mut en = cr.ends[i] as i64;
            if st == -233 {
                st = 0;
            }
            if en == -233 {
                en = n;
            }
            let o = if st >= 0 { st } else { n + st };
            off[pos] = o;
            len[pos] = n.min(if en > 0 { en } else { n + en }) - o;
        }
    } else {
        let o = [cr.coffset as i64, cr.hoffset as i64, cr.woffset as i64];
        let o2 = [cr.coffset2 as i64, cr.hoffset2 as i64, cr.woffset2 as i64];
        let want = [cr.outc as i64, cr.outh as i64, cr.outw as i64];
        for pos in (3 - d as usize)..3 {
            off[pos] = o[pos];
            len[pos] = size[pos] - o[pos] - o2[pos];
            if want[pos] != -233 && want[pos] > 0 {
                len[pos] = len[pos].min(want[pos]);
            }
        }
    }
    for i in 0..3 {
        if off[i] < 0 || len[i] <= 0 || off[i] + len[i] > size[i] {
            bail!(Code::ModelInvalid, "layer {lname}: crop outside the input {:?}", s);
        }
    }
    let os = Shape { dims: s.dims, c: len[0] as usize, h: len[1] as usize, w: len[2] as usize };
    Ok((os, [off[0] as usize, off[1] as usize, off[2] as usize]))
}

pub(crate) struct PoolGeom {
    pub out: Shape,
    pub oh: usize,
    pub ow: usize,
    pub kh: usize,
    pub kw: usize,
    pub sh: usize,
    pub sw: usize,
    pub pt: usize,
    pub pl: usize,
    pub include_pad: bool,
    pub hi_y: i64,
    pub hi_x: i64,
    pub lo_y: i64,
    pub lo_x: i64,
    pub adaptive: bool,
}

pub(crate) fn pool_geometry(p: &lucent_core::ncnn::Pooling, s: Shape, lname: &str) -> Result<PoolGeom> {
    if s.dims != 3 {
        bail!(Code::ModelInvalid, "layer {lname}: pooling of a {}-D blob", s.dims);
    }
    if p.global {
        return Ok(PoolGeom {
            out: Shape { dims: 1, c: 1, h: 1, w: s.c },
            oh: 1,
            ow: 1,
            kh: s.h,
            kw: s.w,
            sh: 1,
            sw: 1,
            pt: 0,
            pl: 0,
            include_pad: false,
            hi_y: s.h as i64,
            hi_x: s.w as i64,
            lo_y: 0,
            lo_x: 0,
            adaptive: false,
        });
    }
    if p.adaptive {
        let oh = if p.out_h == 0 { s.h } else { p.out_h };
        let ow = if p.out_w == 0 { s.w } else { p.out_w };
        return Ok(PoolGeom { out: Shape::d3(s.c, oh, ow), oh, ow, kh: 0, kw: 0, sh: 1, sw: 1, pt: 0, pl: 0, include_pad: false, hi_y: s.h as i64, hi_x: s.w as i64, lo_y: 0, lo_x: 0, adaptive: true });
    }
    let (kw, kh, sw, sh) = (p.kernel_w, p.kernel_h, p.stride_w.max(1), p.stride_h.max(1));
    let (mut pl, mut pr, mut pt, mut pb) = (p.pad_left, p.pad_right, p.pad_top, p.pad_bottom);
    let (opr, opb) = (pr, pb);
    match p.pad_mode {
        0 => {
            let wt = (s.w + pl + pr).saturating_sub(kw) % sw;
            if wt != 0 {
                pr += sw - wt;
            }
            let ht = (s.h + pt + pb).saturating_sub(kh) % sh;
            if ht != 0 {
                pb += sh - ht;
            }
        }
        2 | 3 => {
            let wpad = (kw + (s.w - 1) / sw * sw).saturating_sub(s.w);
            let hpad = (kh + (s.h - 1) / sh * sh).saturating_sub(s.h);
            if p.pad_mode == 2 {
                (pl, pr, pt, pb) = (wpad / 2, wpad - wpad / 2, hpad / 2, hpad - hpad / 2);
            } else {
                (pl, pr, pt, pb) = (wpad - wpad / 2, wpad / 2, hpad - hpad / 2, hpad / 2);
            }
        }
        _ => {}
    }
    let tail_h = if p.pad_mode == 0 { pb - opb } else { 0 };
    let tail_w = if p.pad_mode == 0 { pr - opr } else { 0 };
    if s.w + pl + pr < kw || s.h + pt + pb < kh {
        bail!(Code::ModelInvalid, "layer {lname}: pooling window larger than the input");
    }
    let ow = (s.w + pl + pr - kw) / sw + 1;
    let oh = (s.h + pt + pb - kh) / sh + 1;
    Ok(PoolGeom {
        out: Shape::d3(s.c, oh, ow),
        oh,
        ow,
        kh,
        kw,
        sh,
        sw,
        pt,
        pl,
        include_pad: p.count_include_pad,
        hi_y: (s.h + pb) as i64 - (p.pad_bottom + tail_h) as i64,
        hi_x: (s.w + pr) as i64 - (p.pad_right + tail_w) as i64,
        lo_y: p.pad_top as i64 - pt as i64,
        lo_x: p.pad_left as i64 - pl as i64,
        adaptive: false,
    })
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

#[derive(Clone)]
struct BlobVal {
    slot: usize,
    shape: Shape,
}

struct Slot {
    buf: wgpu::Buffer,
    refs: usize,
}

/// One recorded command: a dispatch (kernel, its buffers after the params, params slice, workgroups)
/// or a plain buffer-to-buffer copy (src, src offset, dst, dst offset, bytes; a driver memcpy).
enum Work {
    Dispatch { pipe: wgpu::ComputePipeline, bufs: Vec<wgpu::Buffer>, pofs: usize, plen: usize, wg: (u32, u32, u32) },
    Copy { src: wgpu::Buffer, src_ofs: u64, dst: wgpu::Buffer, dst_ofs: u64, bytes: u64 },
}

struct Cmd {
    work: Work,
    step: usize,
}

struct Rec {
    params: Vec<u32>,
    cmds: Vec<Cmd>,
    slots: Vec<Slot>,
    blobs: Vec<Option<BlobVal>>,
    align: usize,
    uploads: Vec<(wgpu::Buffer, Vec<u8>)>,
    /// Every buffer this run took from the pool or created.
    used: Vec<wgpu::Buffer>,
    es: u64,
    maxdim: u32,
    max_binding: u64,
    step: usize,
    /// Per step: (FLOPs, kernel) of convolutions, for the profile.
    conv_notes: HashMap<usize, (f64, &'static str)>,
}

impl Rec {
    fn buf_of(&self, blob: usize) -> wgpu::Buffer {
        self.slots[self.blobs[blob].as_ref().expect("blob computed").slot].buf.clone()
    }

    fn get_buf(&mut self, s: Shape, pool: &mut HashMap<u64, Vec<wgpu::Buffer>>, ctx: &DevCtx) -> Result<usize> {
        let bytes = s.len() as u64 * self.es;
        if bytes > self.max_binding {
            bail!(
                Code::ImageTooLarge,
                "a {}x{}x{} feature map ({} MiB) exceeds the device's largest storage binding ({} MiB): use smaller tiles",
                s.c,
                s.h,
                s.w,
                bytes >> 20,
                self.max_binding >> 20
            );
        }
        let size = size_class(bytes);
        let buf = match pool.get_mut(&size).and_then(|v| v.pop()) {
            Some(b) => b,
            None => {
                let d = ctx.device.clone();
                ctx.scoped("allocating a feature map", || {
                    d.create_buffer(&wgpu::BufferDescriptor {
                        label: Some("blob"),
                        size,
                        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                        mapped_at_creation: false,
                    })
                })?
            }
        };
        self.used.push(buf.clone());
        self.slots.push(Slot { buf, refs: 1 });
        Ok(self.slots.len() - 1)
    }

    fn alloc_blob(&mut self, blob: usize, s: Shape, pool: &mut HashMap<u64, Vec<wgpu::Buffer>>, ctx: &DevCtx) -> Result<wgpu::Buffer> {
        let slot = self.get_buf(s, pool, ctx)?;
        self.blobs[blob] = Some(BlobVal { slot, shape: s });
        Ok(self.slots[slot].buf.clone())
    }

    /// A scratch buffer that lives to the end of the run.
    fn alloc_temp(&mut self, s: Shape, pool: &mut HashMap<u64, Vec<wgpu::Buffer>>, ctx: &DevCtx) -> Result<wgpu::Buffer> {
        let slot = self.get_buf(s, pool, ctx)?;
        Ok(self.slots[slot].buf.clone())
    }

    fn alias(&mut self, top: usize, bottom: usize, s: Shape) {
        let slot = self.blobs[bottom].as_ref().unwrap().slot;
        self.slots[slot].refs += 1;
        self.blobs[top] = Some(BlobVal { slot, shape: s });
    }

    fn release_blob(&mut self, blob: usize, pool: &mut HashMap<u64, Vec<wgpu::Buffer>>) {
        let Some(b) = self.blobs[blob].take() else { return };
        let slot = &mut self.slots[b.slot];
        slot.refs -= 1;
        if slot.refs == 0 {
            // Later dispatches in the same encoder may reuse it: wgpu orders them with barriers.
            pool.entry(slot.buf.size()).or_default().push(slot.buf.clone());
        }
    }

    fn cmd(&mut self, pipe: wgpu::ComputePipeline, bufs: Vec<wgpu::Buffer>, p: &[u32], wg: (u32, u32, u32)) {
        let pofs = self.params.len().div_ceil(self.align) * self.align;
        self.params.resize(pofs, 0);
        self.params.extend_from_slice(p);
        self.cmds.push(Cmd { work: Work::Dispatch { pipe, bufs, pofs, plen: p.len(), wg }, step: self.step });
    }

    /// A buffer-to-buffer copy; offsets and size must be multiples of 4 bytes (wgpu's copy alignment).
    fn copy(&mut self, src: wgpu::Buffer, src_ofs: u64, dst: wgpu::Buffer, dst_ofs: u64, bytes: u64) {
        debug_assert!(src_ofs % 4 == 0 && dst_ofs % 4 == 0 && bytes % 4 == 0);
        self.cmds.push(Cmd { work: Work::Copy { src, src_ofs, dst, dst_ofs, bytes }, step: self.step });
    }

    fn ew(&mut self, pipe: wgpu::ComputePipeline, bufs: Vec<wgpu::Buffer>, p: &[u32], n: usize) -> Result<()> {
        let (x, y) = fold(n.div_ceil(EW as usize), self.maxdim)?;
        self.cmd(pipe, bufs, p, (x, y, 1));
        Ok(())
    }
}
