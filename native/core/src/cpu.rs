//! The fast CPU backend: the executor (blob values, layer dispatch, fusion of followers into conv
//! epilogues). The kernels live in `cpu/`:
//! - [`isa`]: the instruction-set level (scalar, AVX2+FMA, AVX-512F), detected once per process;
//! - [`conv`]: row-block im2col + GEMM (the `gemm` crate), depthwise, deconvolution;
//! - [`winograd`] F(4x4, 3x3) for 3x3 stride-1 ungrouped convs, with its GEMMs on [`wgemm`]'s
//!   micro-kernels over the [`simd`] vector types;
//! - [`calibrate`]: Winograd or im2col per layer, by measured cost (cached per process);
//! - [`epilogue`]: bias, activation, fused PReLU/ReLU and residual sums on each output row.
//!
//! Over 500 lines on purpose: the executor (blob table, layer dispatch, fusion decisions) is one
//! state machine over every layer kind; splitting it would spread one decision across files.
//!
//! Fusion (decided at prepare time, applied when the intermediate blobs are not requested): a conv's
//! only reader, when it is a PReLU/ReLU, then any chain of two-input Eltwise sums / BinaryOp adds
//! whose running value is the only reader and whose other input was computed before the conv,
//! runs inside the conv's epilogue (RRDB: leaky ReLU in the conv, `x + 0.2 f(x)` twice per RRDB).
//! Channel concats whose result only feeds convolutions are never materialised: the conv reads the
//! input planes from the parts. Every other op uses the plain [`crate::reference`] implementation
//! (all linear-time).
//!
//! Long (~590 lines) on purpose: the executor's dispatch and fusion for every layer kind in one place;
//! the kernels themselves are the modules of `cpu/`.

pub mod calibrate;
mod conv;
mod epilogue;
pub mod isa;
mod simd;
pub mod wgemm;
mod warp;
mod winograd;
mod wtransform;

use crate::backend::{Backend, BackendInfo, Cancel, Prepared};
use crate::bail;
use crate::error::{Code, Error, Result};
use crate::ncnn::model::{BinaryOpKind, Conv, EltwiseKind, Layer, Net, Op};
use crate::reference;
use crate::tensor::Tensor;
use conv::{ConvAlgo, PackedDeconv, SendPtr};
use epilogue::Residual;
pub use calibrate::ConvPolicy;
pub use isa::Isa;
use std::sync::Arc;

pub struct CpuBackend {
    threads: usize,
    pool: Arc<rayon::ThreadPool>,
    isa: Isa,
    policy: ConvPolicy,
}

impl CpuBackend {
    /// A backend with its own pool of `threads` workers (default: all available cores).
    pub fn new(threads: Option<usize>) -> Self {
        let n = threads
            .filter(|&t| t > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("lucent-cpu-{i}"))
            .build()
            .or_else(|_| rayon::ThreadPoolBuilder::new().num_threads(1).build())
            .expect("cannot start even a one-thread pool");
        CpuBackend { threads: n, pool: Arc::new(pool), isa: Isa::detected(), policy: ConvPolicy::from_env() }
    }

    /// The same backend with another Winograd / im2col policy (default: `LUCENT_CPU_WINOGRAD`, else
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

    /// The instruction-set level of the hot loops.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Prepare without the trait object (for tests and benches).
    pub fn prepare_net(&self, net: Arc<Net>) -> Result<CpuNet> {
        CpuNet::new(net, self.pool.clone(), self.isa, self.policy)
    }
}

impl Backend for CpuBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo { kind: "cpu", adapter: "cpu".into(), f16: false }
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

/// A layer that may run inside a conv's epilogue (see the module doc).
#[derive(Clone, Debug)]
enum Follower {
    /// PReLU / ReLU: one slope, or one per channel.
    Slope(Vec<f32>),
    /// `v = keep * v + add * other`.
    Residual { keep: f32, add: f32, other: usize },
}

/// The followers a conv can absorb, in graph order (at run time a prefix of them is fused: up to
/// the first whose input is a requested blob or whose other operand does not fit).
#[derive(Default)]
struct Fusion {
    followers: Vec<(usize, Follower)>,
}

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
}

/// The follower layer `j` as an epilogue step for a running value in blob `cur`, if it is one.
/// `producer[b]` is the index of the layer writing blob `b`; `li` is the conv's index.
fn follower(l: &Layer, cur: usize, producer: &[usize], li: usize, oc: usize, first: bool) -> Option<Follower> {
    if l.tops.len() != 1 {
        return None;
    }
    match &l.op {
        Op::PReLU { slope } if first && l.bottoms.len() == 1 && (slope.len() == 1 || slope.len() == oc) => Some(Follower::Slope(slope.clone())),
        Op::ReLU { slope } if first && l.bottoms.len() == 1 => Some(Follower::Slope(vec![*slope])),
        Op::Eltwise { op: EltwiseKind::Sum, .. } | Op::BinaryOp { op: BinaryOpKind::Add, scalar: None, .. } if l.bottoms.len() == 2 => {
            let me = l.bottoms.iter().position(|&b| b == cur)?;
            let other = l.bottoms[1 - me];
            if other == cur || producer.get(other).is_none_or(|&p| p >= li) {
                return None;
            }
            let co = match &l.op {
                Op::Eltwise { coeffs, .. } if coeffs.len() == 2 => [coeffs[0], coeffs[1]],
                Op::Eltwise { coeffs, .. } if !coeffs.is_empty() => return None,
                _ => [1.0, 1.0],
            };
            Some(Follower::Residual { keep: co[me], add: co[1 - me], other })
        }
        _ => None,
    }
}

impl CpuNet {
    fn new(net: Arc<Net>, pool: Arc<rayon::ThreadPool>, isa: Isa, policy: ConvPolicy) -> Result<Self> {
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
                    choice = Some(pool.install(|| calibrate::choose(c, isa, policy)));
                    if l.tops.len() == 1 {
                        let mut cur = l.tops[0];
                        while readers[cur].len() == 1 {
                            let j = readers[cur][0];
                            let first = fusion[li].followers.is_empty();
                            match follower(&net.layers[j], cur, &producer, li, c.num_output, first) {
                                Some(f) => fusion[li].followers.push((j, f)),
                                None => break,
                            }
                            cur = net.layers[j].tops[0];
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
        // LUCENT_CPU_KEEP_TRANSFORMS=0: transform every conv's whole input afresh (for comparisons).
        let keep = if std::env::var("LUCENT_CPU_KEEP_TRANSFORMS").as_deref() == Ok("0") { KeepPlan::default() } else { KeepPlan::new(&net, &algo) };
        Ok(CpuNet { net, pool, isa, fusion, deconv, algo, keep, spare: Default::default(), last_use })
    }

    /// Layers that can run inside a conv's epilogue (planned at prepare time; at run time a
    /// requested intermediate blob keeps its followers out).
    pub fn fusable_followers(&self) -> usize {
        self.fusion.iter().map(|f| f.followers.len()).sum()
    }

    /// Blobs whose Winograd input transform is kept for a later conv (dense blocks).
    pub fn kept_transform_sources(&self) -> usize {
        let mut s: Vec<usize> = self.keep.parts.iter().flatten().filter(|p| p.1).map(|p| p.0).collect();
        s.sort_unstable();
        s.dedup();
        s.len()
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
        let profile = std::env::var_os("LUCENT_CPU_PROFILE").is_some();
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
                for &(fj, _) in &self.fusion[li].followers {
                    skip[fj] = true;
                    for &b in &net.layers[fj].bottoms {
                        self.release(&mut vals, b, fj, &requested);
                    }
                    if fj == j {
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
                let mut others: Vec<(f32, f32, Arc<Tensor>)> = Vec::new();
                let mut last = None;
                let mut cur = l.tops[0];
                for (j, f) in &self.fusion[li].followers {
                    if requested[cur] {
                        break;
                    }
                    match f {
                        Follower::Slope(s) => slope = Some(s.as_slice()),
                        Follower::Residual { keep, add, other } => {
                            let t = match vals[*other].as_ref().map(|v| v.materialize()) {
                                Some(Ok(t)) if t.dims == 3 && Some((t.c, t.h, t.w)) == out_chw => t,
                                _ => break,
                            };
                            others.push((*keep, *add, t));
                        }
                    }
                    last = Some(*j);
                    cur = self.net.layers[*j].tops[0];
                }
                let residual: Vec<Residual> = others.iter().map(|(keep, add, t)| Residual { keep: *keep, add: *add, other: &t.data }).collect();
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
            _ => {
                let mats: Vec<Arc<Tensor>> = l.bottoms.iter().map(|&b| get(b)?.materialize()).collect::<Result<_>>()?;
                let refs: Vec<&Tensor> = mats.iter().map(|t| t.as_ref()).collect();
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
