//! The fast CPU backend: the executor (blob values, layer dispatch, fusion of followers into conv
//! epilogues). Over 500 lines on purpose (~680): the executor's dispatch and fusion for every layer
//! kind in one place (blob table, layer dispatch, fusion decisions are one state machine); the
//! kernels themselves are the modules of `cpu/`:
//! - [`isa`]: the instruction-set level (scalar, AVX2+FMA, AVX-512F), detected once per process;
//! - [`conv`]: row-block im2col + GEMM (the `gemm` crate), depthwise, deconvolution;
//! - [`direct`]: large kernels (7x7 and up, stride 1) as a direct register-blocked loop;
//! - [`winograd`] F(4x4, 3x3) for 3x3 stride-1 ungrouped convs, with its GEMMs on [`wgemm`]'s
//!   micro-kernels over the [`simd`] vector types;
//! - [`bf16`]: bf16 direct convolution (AMX tiles through [`amx`], AVX512-BF16, or emulated) for a
//!   backend whose [`Precision`] is `Bf16`; [`CpuOptions::effective_bf16`] says what runs and why;
//! - [`int8`]: int8 direct convolution (AMX-INT8, AVX512-VNNI, or emulated) for `Precision::Int8`,
//!   the same layout and epilogues as bf16;
//! - [`calibrate`]: Winograd or im2col per layer, and bf16 / int8 or not, by measured cost (cached per process);
//! - [`epilogue`]: bias, activation, fused PReLU/ReLU, residual sums, products, SiLU and gates on
//!   each output row ([`vmath`]: the vectorisable exp / sigmoid / Mish they use);
//! - [`fuse`]: which layers after a conv its epilogue absorbs;
//! - [`eltwise`]: the element-wise layers left over (BinaryOp, Sigmoid, Scale, Eltwise sums),
//!   vectorised and spread over the pool;
//! - [`pool`]: max pooling (U²-Net's 2x2 `ceil_mode` one), [`resize`]: bilinear Interp, spread
//!   over the pool with the reference's arithmetic;
//! - [`attention`]: the transformer ops (LayerNorm, GELU, reflect padding, window and channel
//!   attention; [`overlap`]: HAT's overlapping one), spread over the pool per window and head.
//!
//! Fusion (decided at prepare time, applied when the intermediate blobs are not requested; see
//! [`fuse`]): e.g. RRDB's leaky ReLU and `x + 0.2 f(x)` twice per RRDB, SPAN's SiLUs and block tails,
//! RealPLKSR's attention product, run inside the conv's epilogue. Channel concats whose result only
//! feeds convolutions are never materialised: the conv reads the input planes from the parts.
//! Every other op uses the plain [`crate::reference`] implementation.

mod amx;
mod attention;
pub mod bf16;
mod bf16_job;
pub mod int8;
pub mod calibrate;
mod conv;
mod direct;
mod eltwise;
mod epilogue;
mod fuse;
pub mod isa;
mod options;
mod overlap;
mod pool;
mod ptr;
mod resize;
mod simd;
mod vmath;
pub mod wgemm;
mod warp;
mod winograd;
mod wtransform;

use crate::backend::{Backend, BackendInfo, Cancel, Prepared};
use crate::bail;
use crate::error::{Code, Error, Result};
use crate::ncnn::model::{Conv, Layer, Net, Op};
use crate::reference;
use crate::tensor::Tensor;
use conv::{ConvAlgo, PackedDeconv};
use epilogue::Residual;
use fuse::{next_step, Follower, Fusion};
pub use isa::Isa;
pub use bf16::Bf16Kernel;
pub use int8::Int8Kernel;
pub use options::{CacheFile, ConvPolicy, CpuOptions, Precision};
use std::sync::Arc;

pub struct CpuBackend {
    threads: usize,
    pool: Arc<rayon::ThreadPool>,
    isa: Isa,
    policy: ConvPolicy,
    /// Keep Winograd input transforms across convs ([`CpuOptions::keep_transforms`]).
    keep_transforms: bool,
    /// Per-op-kind times to stderr ([`CpuOptions::profile`]).
    profile: bool,
    /// The bf16 kernel convs may use (None: fp32 only; [`CpuOptions::effective_bf16`]).
    bf16: Option<Bf16Kernel>,
    /// The int8 kernel convs may use (None: no int8; [`CpuOptions::effective_int8`]).
    int8: Option<Int8Kernel>,
    /// What the convs run and why ([`CpuBackend::precision`]).
    precision: String,
    /// Per-layer overrides ([`CpuOptions::layer_precision`]) with the kernels they may use.
    layers: Arc<LayerKernels>,
}

/// The kernels of the per-layer precision overrides, by conv layer name: (bf16, int8), as
/// [`CpuOptions::kernels_for`] gives them.
type LayerKernels = std::collections::HashMap<String, (Option<Bf16Kernel>, Option<Int8Kernel>)>;

impl CpuBackend {
    /// A backend with its own pool of `threads` workers (default: all available cores) and
    /// otherwise default options.
    pub fn new(threads: Option<usize>) -> Self {
        CpuBackend::with_options(&CpuOptions { threads, ..Default::default() })
    }

    /// A backend with these options (the process-wide ones, the Winograd chunk and the
    /// calibration's cache file, are set by the first backend that gives them).
    pub fn with_options(o: &CpuOptions) -> Self {
        let n = o
            .threads
            .filter(|&t| t > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("lucent-cpu-{i}"))
            .build()
            .or_else(|_| rayon::ThreadPoolBuilder::new().num_threads(1).build())
            .expect("cannot start even a one-thread pool");
        CpuBackend::from_parts(o, Arc::new(pool))
    }

    /// A backend with options `o` on this backend's worker pool (`o.threads` ignored): the engine's
    /// per-network precisions share one pool instead of starting one per precision.
    pub fn sharing_pool(&self, o: &CpuOptions) -> Self {
        CpuBackend::from_parts(o, self.pool.clone())
    }

    fn from_parts(o: &CpuOptions, pool: Arc<rayon::ThreadPool>) -> Self {
        if let Some(c) = o.wino_chunk.filter(|&c| c > 0) {
            winograd::set_chunk(c);
        }
        calibrate::set_cache_file(&o.calibration_cache);
        let (bf16, mut precision) = o.effective_bf16();
        let layers: LayerKernels = o.layer_precision.iter().map(|(name, p)| (name.clone(), o.kernels_for(*p))).collect();
        if !o.layer_precision.is_empty() {
            // What the named layers run here (a precision this CPU lacks: fp32).
            let mut by: std::collections::BTreeMap<&str, usize> = Default::default();
            for k in layers.values() {
                *by.entry(match k {
                    (_, Some(_)) => "int8",
                    (Some(_), _) => "bf16",
                    _ => "fp32",
                })
                .or_default() += 1;
            }
            let by: Vec<String> = by.iter().map(|(p, n)| format!("{n} {p}")).collect();
            precision = format!("{precision}; per-layer rule: {} conv layer(s) set apart", by.join(", "));
        }
        CpuBackend {
            layers: Arc::new(layers),
            bf16,
            int8: o.effective_int8(),
            precision,
            threads: pool.current_num_threads(),
            pool,
            isa: o.effective_isa(),
            policy: o.policy,
            keep_transforms: o.keep_transforms,
            profile: o.profile,
        }
    }

    /// The same backend with another Winograd / im2col policy (default: [`CpuOptions::policy`],
    /// measured per layer).
    pub fn with_policy(self, policy: ConvPolicy) -> Self {
        CpuBackend { policy, ..self }
    }

    /// A backend whose hot loops use `isa` (for tests and comparisons); `InvalidArgument` when this CPU
    /// cannot run it (the message says why).
    pub fn with_isa(threads: Option<usize>, isa: Isa) -> Result<Self> {
        if let Some(why) = isa.unsupported_reason() {
            bail!(Code::InvalidArgument, "{}: {why}", isa.name());
        }
        Ok(CpuBackend { isa, ..CpuBackend::new(threads) })
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// What the convolutions run: `fp32`, or `bf16 (<kernel>) where measured faster, else fp32`; when
    /// a narrower precision was asked for and fp32 runs instead, why (no bf16 / int8 unit).
    pub fn precision(&self) -> &str {
        &self.precision
    }

    /// The bf16 kernel the convs may use (None: fp32 only).
    pub fn bf16_kernel(&self) -> Option<Bf16Kernel> {
        self.bf16
    }

    /// The instruction-set level of the hot loops.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Prepare without the trait object (for tests and benches).
    pub fn prepare_net(&self, net: Arc<Net>) -> Result<CpuNet> {
        let mut n = CpuNet::new(net, self.pool.clone(), self.isa, self.policy, (self.bf16, self.int8), &self.layers, self.keep_transforms)?;
        n.profile = self.profile;
        Ok(n)
    }
}

impl Backend for CpuBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo { kind: "cpu", adapter: "cpu".into(), f16: false, cpu_isa: Some(self.isa.name()), threads: Some(self.threads), cpu_precision: Some(self.precision.clone()) }
    }

    fn prepare(&self, net: Arc<Net>) -> Result<Arc<dyn Prepared>> {
        Ok(Arc::new(self.prepare_net(net)?))
    }

    /// 256 px for networks that upsample inside (their late feature maps are 4-16x bigger),
    /// 512 px otherwise; keeps peak memory to a few hundred MB for 64-channel networks.
    fn max_tile(&self, net: &Net) -> usize {
        let upsamples = net.layers.iter().any(|l| matches!(l.op, Op::PixelShuffle { .. } | Op::Interp(_) | Op::Deconv(_)));
        let wide = net.layers.iter().any(|l| matches!(&l.op, Op::Conv(c) if c.num_output > 128));
        if upsamples || wide {
            256
        } else {
            512
        }
    }
}

/// A blob value during a run: a tensor, or a channel concat of 3-D tensors that was not copied.
#[derive(Clone)]
enum Val {
    T(Arc<Tensor>),
    Cat(Vec<Arc<Tensor>>),
}

impl Val {
    fn materialize(&self) -> Result<Arc<Tensor>> {
        match self {
            Val::T(t) => Ok(t.clone()),
            Val::Cat(parts) => {
                let refs: Vec<&Tensor> = parts.iter().map(|p| p.as_ref()).collect();
                Ok(Arc::new(reference::concat(0, &refs)?))
            }
        }
    }
    /// (channels, h, w) when this is a 3-D value.
    fn chw(&self) -> Option<(usize, usize, usize)> {
        match self {
            Val::T(t) if t.dims == 3 => Some((t.c, t.h, t.w)),
            Val::T(_) => None,
            Val::Cat(p) => Some((p.iter().map(|t| t.c).sum(), p[0].h, p[0].w)),
        }
    }
    fn planes(&self) -> Vec<&[f32]> {
        match self {
            Val::T(t) => (0..t.c).map(|c| t.channel(c)).collect(),
            Val::Cat(p) => p.iter().flat_map(|t| (0..t.c).map(move |c| t.channel(c))).collect(),
        }
    }
    /// The tensors this value is made of, in channel order.
    fn parts(&self) -> Vec<&Arc<Tensor>> {
        match self {
            Val::T(t) => vec![t],
            Val::Cat(p) => p.iter().collect(),
        }
    }
}

/// Which Winograd input transforms to keep (dense blocks): for each conv layer that runs on
/// Winograd, the source blob of each part of its input and whether that source is read by another
/// Winograd conv too (then its transform is kept until its last such reader has run).
#[derive(Default)]
struct KeepPlan {
    parts: Vec<Vec<(usize, bool)>>,
    /// For a source blob: the last Winograd conv reading it.
    last_reader: Vec<Option<usize>>,
}

impl KeepPlan {
    fn new(net: &Net, algo: &[Option<ConvAlgo>]) -> KeepPlan {
        let nb = net.blob_names.len();
        // The source blobs each blob's value is made of (Split/Noop pass the tensor on, channel
        // Concats of 3-D parts stay lazy: see Val::Cat).
        let mut src: Vec<Vec<usize>> = (0..nb).map(|b| vec![b]).collect();
        for l in &net.layers {
            match &l.op {
                Op::Split | Op::Noop if !l.bottoms.is_empty() => {
                    for &t in &l.tops {
                        src[t] = src[l.bottoms[0]].clone();
                    }
                }
                Op::Concat { axis: 0 | -3 } if l.tops.len() == 1 => {
                    src[l.tops[0]] = l.bottoms.iter().flat_map(|&b| src[b].clone()).collect();
                }
                _ => {}
            }
        }
        let wino = |li: usize| matches!(algo[li], Some(ConvAlgo::Winograd(_)));
        let mut readers = vec![0usize; nb];
        let mut last_reader = vec![None; nb];
        for (li, l) in net.layers.iter().enumerate() {
            if wino(li) {
                for &s in &src[l.bottoms[0]] {
                    readers[s] += 1;
                    last_reader[s] = Some(li);
                }
            }
        }
        let parts = net
            .layers
            .iter()
            .enumerate()
            .map(|(li, l)| if wino(li) { src[l.bottoms[0]].iter().map(|&s| (s, readers[s] >= 2)).collect() } else { Vec::new() })
            .collect();
        KeepPlan { parts, last_reader }
    }
}

/// Kept Winograd input transforms during one run, by source blob.
type Kept = std::collections::HashMap<usize, Arc<winograd::TransformedInput>>;

pub struct CpuNet {
    net: Arc<Net>,
    pool: Arc<rayon::ThreadPool>,
    isa: Isa,
    /// For a conv layer: what its epilogue can absorb.
    fusion: Vec<Fusion>,
    deconv: Vec<Option<PackedDeconv>>,
    algo: Vec<Option<ConvAlgo>>,
    keep: KeepPlan,
    /// Buffers of dropped kept transforms, reused by the next ones (runs of one net are serial
    /// per call but the net may be shared: hence the lock).
    spare: std::sync::Mutex<Vec<Vec<f32>>>,
    last_use: Vec<Option<usize>>,
    /// Per-op-kind times of every run to stderr.
    profile: bool,
}

impl CpuNet {
    fn new(net: Arc<Net>, pool: Arc<rayon::ThreadPool>, isa: Isa, policy: ConvPolicy, narrow: (Option<Bf16Kernel>, Option<Int8Kernel>), layers: &LayerKernels, keep_transforms: bool) -> Result<Self> {
        let nl = net.layers.len();
        let nb = net.blob_names.len();
        let mut readers: Vec<Vec<usize>> = vec![Vec::new(); nb];
        for (li, l) in net.layers.iter().enumerate() {
            for &b in &l.bottoms {
                readers[b].push(li);
            }
        }
        let mut producer = vec![usize::MAX; nb];
        for (li, l) in net.layers.iter().enumerate() {
            for &t in &l.tops {
                producer[t] = producer[t].min(li);
            }
        }
        let mut fusion: Vec<Fusion> = (0..nl).map(|_| Fusion::default()).collect();
        let mut deconv = Vec::with_capacity(nl);
        let mut algo = Vec::with_capacity(nl);
        for (li, l) in net.layers.iter().enumerate() {
            let mut packed = None;
            let mut choice = None;
            match &l.op {
                Op::Conv(c) => {
                    validate_conv(l, c)?;
                    let (b, i) = layers.get(&l.name).copied().unwrap_or(narrow);
                    choice = Some(pool.install(|| calibrate::choose(c, isa, policy, b, i)));
                    if l.tops.len() == 1 {
                        let mut cur = l.tops[0];
                        while let Some(step) = next_step(&net, &readers, &producer, li, c.num_output, cur, fusion[li].followers.is_empty()) {
                            cur = net.layers[step.last()].tops[0];
                            fusion[li].followers.push(step);
                        }
                    }
                }
                Op::Deconv(c) => {
                    validate_conv(l, c)?;
                    packed = Some(conv::pack_deconv(c));
                }
                _ => {}
            }
            algo.push(choice);
            deconv.push(packed);
        }
        let last_use = reference::last_uses(&net);
        // keep_transforms false (LUCENT_CPU_KEEP_TRANSFORMS=0): transform every conv's whole input afresh (for comparisons).
        let keep = if keep_transforms { KeepPlan::new(&net, &algo) } else { KeepPlan::default() };
        Ok(CpuNet { net, pool, isa, fusion, deconv, algo, keep, spare: Default::default(), last_use, profile: false })
    }

    /// Layers that can run inside a conv's epilogue (planned at prepare time; at run time a
    /// requested intermediate blob keeps its followers out).
    pub fn fusable_followers(&self) -> usize {
        self.fusion.iter().flat_map(|f| &f.followers).map(|s| s.layers.len()).sum()
    }

    /// Blobs whose Winograd input transform is kept for a later conv (dense blocks).
    pub fn kept_transform_sources(&self) -> usize {
        let mut s: Vec<usize> = self.keep.parts.iter().flatten().filter(|p| p.1).map(|p| p.0).collect();
        s.sort_unstable();
        s.dedup();
        s.len()
    }

    /// The precision of each conv layer, by layer name: `"bf16"`, `"int8"` or `"fp32"`.
    pub fn conv_precisions(&self) -> Vec<(String, &'static str)> {
        self.net
            .layers
            .iter()
            .zip(&self.algo)
            .filter_map(|(l, a)| a.as_ref().map(|a| (l.name.clone(), match a {
                ConvAlgo::Bf16(_) => "bf16",
                ConvAlgo::Int8(_) => "int8",
                _ => "fp32",
            })))
            .collect()
    }

    /// The algorithm picked for each conv layer, by layer name: true for Winograd.
    pub fn conv_algorithms(&self) -> Vec<(String, bool)> {
        self.net
            .layers
            .iter()
            .zip(&self.algo)
            .filter_map(|(l, a)| a.as_ref().map(|a| (l.name.clone(), matches!(a, ConvAlgo::Winograd(_)))))
            .collect()
    }

    fn run_inner(&self, inputs: &[(usize, &Tensor)], outputs: &[usize], cancel: &Cancel) -> Result<Vec<Tensor>> {
        let net = &self.net;
        let nb = net.blob_names.len();
        reference::check_run_args(net, inputs.iter().map(|(b, t)| (*b, *t)), outputs)?;
        let mut vals: Vec<Option<Val>> = vec![None; nb];
        for (b, t) in inputs {
            vals[*b] = Some(Val::T(Arc::new((*t).clone())));
        }
        let mut requested = vec![false; nb];
        for &o in outputs {
            requested[o] = true;
        }
        let mut needed = requested.clone();
        let mut run = vec![false; net.layers.len()];
        for (li, l) in net.layers.iter().enumerate().rev() {
            if l.tops.iter().any(|&t| needed[t]) {
                run[li] = true;
                for &b in &l.bottoms {
                    needed[b] = true;
                }
            }
        }
        let mut skip = vec![false; net.layers.len()];
        let mut kept = Kept::new();
        let profile = self.profile;
        let mut prof: std::collections::BTreeMap<String, f64> = Default::default();
        for (li, l) in net.layers.iter().enumerate() {
            if !run[li] || skip[li] {
                continue;
            }
            cancel.check()?;
            let t0 = std::time::Instant::now();
            let res = self.forward(li, l, &vals, &requested, &mut kept);
            if !kept.is_empty() {
                let done: Vec<usize> = kept.keys().copied().filter(|&s| self.keep.last_reader.get(s).copied().flatten().is_none_or(|r| r <= li)).collect();
                for s in done {
                    if let Some(Ok(tv)) = kept.remove(&s).map(Arc::try_unwrap) {
                        if let Ok(mut spare) = self.spare.lock() {
                            spare.push(tv.into_buffer());
                        }
                    }
                }
            }
            if profile {
                *prof.entry(l.kind.clone()).or_default() += t0.elapsed().as_secs_f64();
            }
            let (tops, skip_next) = res.map_err(|e| Error::new(e.code, format!("layer {} ({}): {}", l.name, l.kind, e.message)))?;
            if let Some(j) = skip_next {
                // Fused followers up to and including layer j: their top gets the value, their
                // inputs are released as if they had run.
                vals[net.layers[j].tops[0]] = Some(tops.into_iter().next().expect("one output"));
                for &b in &l.bottoms {
                    self.release(&mut vals, b, li, &requested);
                }
                for step in &self.fusion[li].followers {
                    for &fj in &step.layers {
                        skip[fj] = true;
                        for &b in &net.layers[fj].bottoms {
                            self.release(&mut vals, b, fj, &requested);
                        }
                    }
                    if step.last() == j {
                        break;
                    }
                }
                continue;
            }
            for (&t, v) in l.tops.iter().zip(tops) {
                vals[t] = Some(v);
            }
            for &b in &l.bottoms {
                self.release(&mut vals, b, li, &requested);
            }
        }
        // Kept transforms' buffers are reused within a run only (they are big: ~2.3x a map).
        if let Ok(mut spare) = self.spare.lock() {
            spare.clear();
        }
        cancel.check()?;
        if profile {
            eprintln!("lucent cpu profile (s): {prof:?}");
        }
        let mut out = Vec::with_capacity(outputs.len());
        for &o in outputs {
            match &vals[o] {
                Some(v) => {
                    let t = v.materialize()?;
                    out.push(Arc::try_unwrap(t).unwrap_or_else(|a| (*a).clone()));
                }
                None => bail!(Code::InvalidArgument, "blob '{}' was not computed", net.blob_names[o]),
            }
        }
        Ok(out)
    }

    fn release(&self, vals: &mut [Option<Val>], b: usize, li: usize, requested: &[bool]) {
        if !requested[b] && self.last_use[b].is_some_and(|u| u <= li) {
            vals[b] = None;
        }
    }

    /// Returns the layer's output values, and the index of the last fused follower (whose top they
    /// fill; see [`Fusion`]).
    fn forward(&self, li: usize, l: &Layer, vals: &[Option<Val>], requested: &[bool], kept: &mut Kept) -> Result<(Vec<Val>, Option<usize>)> {
        let get = |b: usize| -> Result<&Val> {
            vals[b].as_ref().ok_or_else(|| Error::new(Code::InvalidArgument, format!("blob '{}' is not available", self.net.blob_names[b])))
        };
        let single = |v: Val| -> Result<(Vec<Val>, Option<usize>)> {
            if l.tops.len() != 1 {
                bail!(Code::ModelInvalid, "layer has {} outputs, expected 1", l.tops.len());
            }
            Ok((vec![v], None))
        };
        match &l.op {
            Op::Input { .. } => {
                for &t in &l.tops {
                    if vals[t].is_none() {
                        bail!(Code::InvalidArgument, "input blob '{}' was not provided", self.net.blob_names[t]);
                    }
                }
                // Keep the provided values: return them unchanged.
                Ok((l.tops.iter().map(|&t| vals[t].clone().expect("checked")).collect(), None))
            }
            Op::Conv(c) => {
                let x = get(*l.bottoms.first().ok_or_else(|| Error::new(Code::ModelInvalid, "no input"))?)?;
                // The conv's output shape, for checking residual operands.
                let out_chw = x.chw().and_then(|(_, h, w)| reference::conv_geometry(c, w, h).ok()).map(|g| (c.num_output, g.out_h, g.out_w));
                let mut slope = None;
                // (follower, its other operand when it has one)
                let mut steps: Vec<(&Follower, Option<Arc<Tensor>>)> = Vec::new();
                let mut last = None;
                let mut cur = l.tops[0];
                for step in &self.fusion[li].followers {
                    // The running value and every intermediate top of the step must be unrequested.
                    if requested[cur] || step.layers.iter().any(|&j| j != step.last() && self.net.layers[j].tops.iter().any(|&t| requested[t])) {
                        break;
                    }
                    let other = match step.f {
                        Follower::Slope(ref s) => {
                            slope = Some(s.as_slice());
                            None
                        }
                        Follower::Silu => None,
                        Follower::Residual { other, .. } | Follower::Product { other } | Follower::Gate { other, .. } => {
                            match vals[other].as_ref().map(|v| v.materialize()) {
                                Some(Ok(t)) if t.dims == 3 && Some((t.c, t.h, t.w)) == out_chw => Some(t),
                                _ => break,
                            }
                        }
                    };
                    if !matches!(step.f, Follower::Slope(_)) {
                        steps.push((&step.f, other));
                    }
                    last = Some(step.last());
                    cur = self.net.layers[step.last()].tops[0];
                }
                fn data(t: &Option<Arc<Tensor>>) -> &[f32] {
                    t.as_ref().map(|t| t.data.as_slice()).unwrap_or(&[])
                }
                let residual: Vec<Residual> = steps
                    .iter()
                    .filter_map(|(f, t)| match **f {
                        Follower::Residual { keep, add, .. } => Some(Residual::Sum { keep, add, other: data(t) }),
                        Follower::Product { .. } => Some(Residual::Product { other: data(t) }),
                        Follower::Gate { keep, add, shift, .. } => Some(Residual::Gate { keep, add, other: data(t), shift }),
                        Follower::Silu => Some(Residual::Silu),
                        Follower::Slope(_) => None,
                    })
                    .collect();
                let algo = self.algo[li].as_ref().expect("conv algorithm");
                let kept_parts = self.kept_parts(li, c, algo, x, kept);
                let kept_refs: Vec<Option<&winograd::TransformedInput>> = kept_parts.iter().map(|k| k.as_deref()).collect();
                let out = self.pool.install(|| conv::conv_forward(c, algo, self.isa, x, slope, &residual, &kept_refs))?;
                let v = Val::T(Arc::new(out));
                match last {
                    Some(j) => Ok((vec![v], Some(j))),
                    None => single(v),
                }
            }
            Op::Deconv(c) => {
                let x = get(l.bottoms[0])?.materialize()?;
                let packed = self.deconv[li].as_ref().expect("packed deconv");
                let out = self.pool.install(|| conv::deconv_forward(c, packed, self.isa, &x))?;
                single(Val::T(Arc::new(out)))
            }
            Op::Split => {
                let x = get(l.bottoms[0])?;
                Ok((l.tops.iter().map(|_| x.clone()).collect(), None))
            }
            Op::Noop => single(get(l.bottoms[0])?.clone()),
            Op::Warp if l.bottoms.len() == 2 => {
                let (img, flow) = (get(l.bottoms[0])?.materialize()?, get(l.bottoms[1])?.materialize()?);
                single(Val::T(Arc::new(self.pool.install(|| warp::forward(&img, &flow))?)))
            }
            Op::Concat { axis } => {
                let xs: Vec<&Val> = l.bottoms.iter().map(|&b| get(b)).collect::<Result<_>>()?;
                let all3 = xs.iter().all(|v| v.chw().is_some());
                let ax0 = *axis == 0 || *axis == -3;
                if all3 && ax0 {
                    let (_, h0, w0) = xs[0].chw().expect("3-D");
                    if xs.iter().all(|v| {
                        let (_, h, w) = v.chw().expect("3-D");
                        h == h0 && w == w0
                    }) {
                        let mut parts = Vec::new();
                        for v in xs {
                            match v {
                                Val::T(t) => parts.push(t.clone()),
                                Val::Cat(p) => parts.extend(p.iter().cloned()),
                            }
                        }
                        return single(Val::Cat(parts));
                    }
                }
                let mats: Vec<Arc<Tensor>> = xs.iter().map(|v| v.materialize()).collect::<Result<_>>()?;
                let refs: Vec<&Tensor> = mats.iter().map(|t| t.as_ref()).collect();
                single(Val::T(Arc::new(reference::concat(*axis, &refs)?)))
            }
            Op::LayerNorm { .. } | Op::Gelu | Op::PadToMultiple { .. } | Op::WindowAttention(_) | Op::OverlapAttention(_) | Op::ChannelAttention { .. } if l.bottoms.len() == 1 => {
                let x = get(l.bottoms[0])?.materialize()?;
                let fast = if matches!(l.op, Op::OverlapAttention(_)) { overlap::forward } else { attention::forward };
                match self.pool.install(|| fast(&l.op, &x, self.isa)) {
                    Some(out) => single(Val::T(Arc::new(out))),
                    // Operands the fast path does not take: the reference's checks and message.
                    None => Ok((reference::forward_layer(l, &[&x])?.into_iter().map(|t| Val::T(Arc::new(t))).collect(), None)),
                }
            }
            Op::Interp(p) if l.bottoms.len() == 1 => {
                let x = get(l.bottoms[0])?.materialize()?;
                match self.pool.install(|| resize::forward(p, &x)) {
                    Some(out) => single(Val::T(Arc::new(out?))),
                    None => single(Val::T(Arc::new(reference::interp(p, &x)?))),
                }
            }
            Op::Pooling(p) if l.bottoms.len() == 1 => {
                let x = get(l.bottoms[0])?.materialize()?;
                match self.pool.install(|| pool::forward(p, &x)) {
                    Some(out) => single(Val::T(Arc::new(out))),
                    None => single(Val::T(Arc::new(reference::pooling(p, &x)?))),
                }
            }
            _ => {
                let mats: Vec<Arc<Tensor>> = l.bottoms.iter().map(|&b| get(b)?.materialize()).collect::<Result<_>>()?;
                let refs: Vec<&Tensor> = mats.iter().map(|t| t.as_ref()).collect();
                if let Some(out) = self.pool.install(|| eltwise::forward(l, &refs)) {
                    return single(Val::T(Arc::new(out?)));
                }
                let outs = self.pool.install(|| reference::forward_layer(l, &refs))?;
                Ok((outs.into_iter().map(|t| Val::T(Arc::new(t))).collect(), None))
            }
        }
    }
}

impl CpuNet {
    /// For a Winograd conv: the kept input transform of each part of `x` that a later Winograd conv
    /// reads too (made now if missing), or an empty list when nothing is kept for this layer.
    fn kept_parts(&self, li: usize, c: &Conv, algo: &ConvAlgo, x: &Val, kept: &mut Kept) -> Vec<Option<Arc<winograd::TransformedInput>>> {
        let Some(plan) = self.keep.parts.get(li) else { return Vec::new() };
        let ConvAlgo::Winograd(p) = algo else { return Vec::new() };
        let parts = x.parts();
        if plan.len() != parts.len() || !plan.iter().any(|&(_, k)| k) {
            return Vec::new();
        }
        let Some((_, h, w)) = x.chw() else { return Vec::new() };
        let Ok(g) = reference::conv_geometry(c, w, h) else { return Vec::new() };
        let key = self.pool.install(|| winograd::InputKey::new(c, p, w, h, g));
        plan.iter()
            .zip(parts)
            .map(|(&(src, keep), t)| {
                if !keep {
                    return None;
                }
                if let Some(tv) = kept.get(&src).filter(|tv| tv.key() == key) {
                    return Some(tv.clone());
                }
                let planes: Vec<&[f32]> = (0..t.c).map(|i| t.channel(i)).collect();
                let buf = self.spare.lock().ok().and_then(|mut s| s.pop()).unwrap_or_default();
                let tv = Arc::new(self.pool.install(|| winograd::transform_input(key, &planes, buf)));
                kept.insert(src, tv.clone());
                Some(tv)
            })
            .collect()
    }
}

impl Prepared for CpuNet {
    fn run(&self, inputs: &[(usize, &Tensor)], outputs: &[usize], cancel: &Cancel) -> Result<Vec<Tensor>> {
        self.run_inner(inputs, outputs, cancel)
    }
}

fn validate_conv(l: &Layer, c: &Conv) -> Result<()> {
    if c.weight.len() != c.num_output * c.in_per_group() * c.kernel_w * c.kernel_h
        || !c.num_input.is_multiple_of(c.group)
        || c.bias.as_ref().is_some_and(|b| b.len() != c.num_output)
    {
        bail!(Code::ModelInvalid, "layer {}: convolution weights do not match its shape", l.name);
    }
    Ok(())
}
