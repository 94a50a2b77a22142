//! The fast CPU backend.
//!
//! Convolutions run as GEMMs (the `gemm` crate, single-threaded per call) over row blocks of the
//! output: for each block of output rows the im2col matrix of just those rows is built in a
//! per-thread buffer (bounded to a few MB), multiplied by the weight matrix straight into the
//! output tensor, and the epilogue (bias, fused activation, and a PReLU/ReLU that is the conv
//! output's only reader) runs on the block while it is still in cache. Row blocks are spread over a
//! rayon pool, so the work scales with cores. Channel concats whose result only feeds
//! convolutions are never materialised: the conv reads the input planes from the parts. Every
//! other op uses the plain [`crate::reference`] implementation (all linear-time).
//!
//! Convolution algorithms, chosen per layer at prepare time in [`ConvAlgo::choose`]:
//! - [`winograd`] F(4x4, 3x3) for 3x3 stride-1 dilation-1 ungrouped convs with >= 8 channels in
//!   and out (4x fewer multiplies; set `LUCENT_CPU_WINOGRAD=0` to turn it off for comparisons);
//! - depthwise: a direct loop;
//! - everything else: row-block im2col + GEMM (below).

mod warp;
mod winograd;

use crate::backend::{Backend, BackendInfo, Cancel, Prepared};
use crate::bail;
use crate::error::{Code, Error, Result};
use crate::ncnn::model::{Activation, Conv, Layer, Net, Op};
use crate::reference;
use crate::tensor::Tensor;
use gemm::Parallelism;
use rayon::prelude::*;
use std::cell::RefCell;
use std::sync::Arc;

/// Floats of im2col scratch per worker thread (8 MB).
const IM2COL_BUDGET: usize = 2 << 20;

pub struct CpuBackend {
    threads: usize,
    pool: Arc<rayon::ThreadPool>,
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
        CpuBackend { threads: n, pool: Arc::new(pool) }
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Prepare without the trait object (for tests and benches).
    pub fn prepare_net(&self, net: Arc<Net>) -> Result<CpuNet> {
        CpuNet::new(net, self.pool.clone())
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
}

/// What follows the GEMM on each output element: bias, the conv's own activation, then an
/// optional PReLU (one slope per channel, or one shared).
#[derive(Clone, Debug)]
struct Epilogue {
    act: Activation,
    slope: Option<Vec<f32>>,
}

/// How a convolution layer runs (decided once, at prepare time).
enum ConvAlgo {
    Im2col,
    Winograd(winograd::Packed),
}

impl ConvAlgo {
    fn choose(c: &Conv) -> ConvAlgo {
        let enabled = std::env::var("LUCENT_CPU_WINOGRAD").map(|v| v != "0").unwrap_or(true);
        if enabled && winograd::applies(c) {
            ConvAlgo::Winograd(winograd::pack(c))
        } else {
            ConvAlgo::Im2col
        }
    }
}

struct PackedDeconv {
    /// (num_output * kh * kw) x (num_input / group) per group, row-major.
    wt: Vec<f32>,
}

pub struct CpuNet {
    net: Arc<Net>,
    pool: Arc<rayon::ThreadPool>,
    /// For a conv layer: the index of the PReLU/ReLU layer fused into it.
    fused: Vec<Option<usize>>,
    epilogue: Vec<Option<Epilogue>>,
    deconv: Vec<Option<PackedDeconv>>,
    algo: Vec<Option<ConvAlgo>>,
    last_use: Vec<Option<usize>>,
}

impl CpuNet {
    fn new(net: Arc<Net>, pool: Arc<rayon::ThreadPool>) -> Result<Self> {
        let nl = net.layers.len();
        let nb = net.blob_names.len();
        let mut readers: Vec<Vec<usize>> = vec![Vec::new(); nb];
        for (li, l) in net.layers.iter().enumerate() {
            for &b in &l.bottoms {
                readers[b].push(li);
            }
        }
        let mut fused = vec![None; nl];
        let mut epilogue = vec![None; nl];
        let mut deconv = Vec::with_capacity(nl);
        let mut algo = Vec::with_capacity(nl);
        for (li, l) in net.layers.iter().enumerate() {
            let mut packed = None;
            algo.push(match &l.op {
                Op::Conv(c) if validate_conv(l, c).is_ok() => Some(ConvAlgo::choose(c)),
                _ => None,
            });
            match &l.op {
                Op::Conv(c) => {
                    validate_conv(l, c)?;
                    let mut ep = Epilogue { act: c.activation, slope: None };
                    if l.tops.len() == 1 && readers[l.tops[0]].len() == 1 {
                        let j = readers[l.tops[0]][0];
                        let next = &net.layers[j];
                        if next.bottoms.len() == 1 && next.tops.len() == 1 {
                            let slope = match &next.op {
                                Op::PReLU { slope } if slope.len() == 1 || slope.len() == c.num_output => Some(slope.clone()),
                                Op::ReLU { slope } => Some(vec![*slope]),
                                _ => None,
                            };
                            if slope.is_some() {
                                ep.slope = slope;
                                fused[li] = Some(j);
                            }
                        }
                    }
                    epilogue[li] = Some(ep);
                }
                Op::Deconv(c) => {
                    validate_conv(l, c)?;
                    packed = Some(pack_deconv(c));
                }
                _ => {}
            }
            deconv.push(packed);
        }
        let last_use = reference::last_uses(&net);
        Ok(CpuNet { net, pool, fused, epilogue, deconv, algo, last_use })
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
        let profile = std::env::var_os("LUCENT_CPU_PROFILE").is_some();
        let mut prof: std::collections::BTreeMap<String, f64> = Default::default();
        for (li, l) in net.layers.iter().enumerate() {
            if !run[li] || skip[li] {
                continue;
            }
            cancel.check()?;
            let t0 = std::time::Instant::now();
            let res = self.forward(li, l, &vals, &requested);
            if profile {
                *prof.entry(l.kind.clone()).or_default() += t0.elapsed().as_secs_f64();
            }
            let (tops, skip_next) = res.map_err(|e| Error::new(e.code, format!("layer {} ({}): {}", l.name, l.kind, e.message)))?;
            if let Some(j) = skip_next {
                skip[j] = true;
                let nl = &net.layers[j];
                vals[nl.tops[0]] = Some(tops.into_iter().next().expect("one output"));
                for &b in &l.bottoms {
                    self.release(&mut vals, b, li, &requested);
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

    /// Returns the layer's output values, and the index of a fused follower whose top they fill.
    fn forward(&self, li: usize, l: &Layer, vals: &[Option<Val>], requested: &[bool]) -> Result<(Vec<Val>, Option<usize>)> {
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
                let fuse = self.fused[li].filter(|_| !requested[l.tops[0]]);
                let base = self.epilogue[li].as_ref().expect("conv epilogue");
                let ep = if fuse.is_some() { base.clone() } else { Epilogue { act: base.act, slope: None } };
                let algo = self.algo[li].as_ref().expect("conv algorithm");
                let out = self.pool.install(|| conv_forward(c, algo, x, &ep))?;
                let v = Val::T(Arc::new(out));
                match fuse {
                    Some(j) => Ok((vec![v], Some(j))),
                    None => single(v),
                }
            }
            Op::Deconv(c) => {
                let x = get(l.bottoms[0])?.materialize()?;
                let packed = self.deconv[li].as_ref().expect("packed deconv");
                let out = self.pool.install(|| deconv_forward(c, packed, &x))?;
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

impl Prepared for CpuNet {
    fn run(&self, inputs: &[(usize, &Tensor)], outputs: &[usize], cancel: &Cancel) -> Result<Vec<Tensor>> {
        self.run_inner(inputs, outputs, cancel)
    }
}

fn validate_conv(l: &Layer, c: &Conv) -> Result<()> {
    if c.weight.len() != c.num_output * c.in_per_group() * c.kernel_w * c.kernel_h
        || c.num_input % c.group != 0
        || c.bias.as_ref().is_some_and(|b| b.len() != c.num_output)
    {
        bail!(Code::ModelInvalid, "layer {}: convolution weights do not match its shape", l.name);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// convolution

#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

thread_local! {
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

#[inline]
fn epilogue_row(row: &mut [f32], bias: f32, act: Activation, slope: Option<f32>) {
    match (act, slope) {
        (Activation::None, None) => {
            if bias != 0.0 {
                row.iter_mut().for_each(|v| *v += bias);
            }
        }
        (Activation::None, Some(s)) => row.iter_mut().for_each(|v| {
            let t = *v + bias;
            *v = if t < 0.0 { t * s } else { t };
        }),
        (Activation::Relu, None) => row.iter_mut().for_each(|v| *v = (*v + bias).max(0.0)),
        (Activation::LeakyRelu(s), None) => row.iter_mut().for_each(|v| {
            let t = *v + bias;
            *v = if t < 0.0 { t * s } else { t };
        }),
        (a, s) => row.iter_mut().for_each(|v| {
            let t = a.apply(*v + bias);
            *v = match s {
                Some(s) if t < 0.0 => t * s,
                _ => t,
            };
        }),
    }
}

/// Fill `buf` (K x N, row-major, N = rows * out_w) with the im2col of output rows [y0, y1) for
/// the input planes `planes` (one group's channels).
#[allow(clippy::too_many_arguments)]
fn im2col_rows(c: &Conv, planes: &[&[f32]], w: usize, h: usize, pl: usize, pt: usize, ow: usize, y0: usize, y1: usize, buf: &mut [f32]) {
    let n = (y1 - y0) * ow;
    let (kh, kw) = (c.kernel_h, c.kernel_w);
    let pv = c.pad_value;
    for (ic, plane) in planes.iter().enumerate() {
        for ky in 0..kh {
            for kx in 0..kw {
                let k = (ic * kh + ky) * kw + kx;
                let dst = &mut buf[k * n..(k + 1) * n];
                let xoff = (kx * c.dilation_w) as isize - pl as isize;
                // ox range whose input column is inside [0, w)
                let (lo, hi) = if c.stride_w == 1 {
                    let lo = (-xoff).clamp(0, ow as isize) as usize;
                    let hi = (w as isize - xoff).clamp(lo as isize, ow as isize) as usize;
                    (lo, hi)
                } else {
                    (0, 0)
                };
                for oy in y0..y1 {
                    let seg = &mut dst[(oy - y0) * ow..(oy - y0 + 1) * ow];
                    let iy = (oy * c.stride_h + ky * c.dilation_h) as isize - pt as isize;
                    if iy < 0 || iy >= h as isize {
                        seg.fill(pv);
                        continue;
                    }
                    let row = &plane[iy as usize * w..(iy as usize + 1) * w];
                    if c.stride_w == 1 {
                        seg[..lo].fill(pv);
                        let s0 = (lo as isize + xoff) as usize;
                        seg[lo..hi].copy_from_slice(&row[s0..s0 + (hi - lo)]);
                        seg[hi..].fill(pv);
                    } else {
                        for (ox, d) in seg.iter_mut().enumerate() {
                            let ix = (ox * c.stride_w) as isize + xoff;
                            *d = if ix < 0 || ix >= w as isize { pv } else { row[ix as usize] };
                        }
                    }
                }
            }
        }
    }
}

fn conv_forward(c: &Conv, algo: &ConvAlgo, x: &Val, ep: &Epilogue) -> Result<Tensor> {
    let (cin, h, w) = match x.chw() {
        Some(s) => s,
        None => bail!(Code::InvalidArgument, "convolution needs a 3-D input"),
    };
    if cin != c.num_input {
        bail!(Code::InvalidArgument, "convolution expects {} input channels, got {cin}", c.num_input);
    }
    let g = reference::conv_geometry(c, w, h)?;
    let (oh, ow) = (g.out_h, g.out_w);
    let plane = oh * ow;
    let planes = x.planes();
    let mut out = Tensor::zeros(c.num_output, oh, ow);
    if c.group == c.num_input && c.group == c.num_output {
        depthwise(c, &planes, w, h, g, &mut out, ep);
        return Ok(out);
    }
    if let ConvAlgo::Winograd(p) = algo {
        winograd::forward(c, p, &planes, w, h, g, &mut out, ep);
        return Ok(out);
    }
    let (ipg, opg) = (c.in_per_group(), c.out_per_group());
    let k = ipg * c.kernel_h * c.kernel_w;
    // Rows per block: bounded scratch, and enough blocks to keep every thread busy.
    let threads = rayon::current_num_threads().max(1);
    let by_budget = (IM2COL_BUDGET / k.max(1) / ow.max(1)).max(1);
    let by_threads = oh.div_ceil(threads * 4).max(1);
    let rows = by_budget.min(by_threads).min(oh).max(1);
    let nblocks = oh.div_ceil(rows);
    let direct_1x1 = c.kernel_w == 1 && c.kernel_h == 1 && c.stride_w == 1 && c.stride_h == 1 && g.pad_left == 0 && g.pad_top == 0 && oh == h && ow == w;
    let dst = SendPtr(out.data.as_mut_ptr());
    let weight = &c.weight;
    let bias = c.bias.as_deref();
    (0..nblocks).into_par_iter().for_each(|bi| {
        let dst = dst;
        let y0 = bi * rows;
        let y1 = (y0 + rows).min(oh);
        let n = (y1 - y0) * ow;
        SCRATCH.with(|s| {
            let mut buf = s.borrow_mut();
            for grp in 0..c.group {
                let gplanes = &planes[grp * ipg..(grp + 1) * ipg];
                // rhs: K x N with row stride rs
                let (rhs, rhs_rs): (*const f32, isize) = if direct_1x1 && gplanes.windows(2).all(|p| {
                    p[1].as_ptr() as usize == p[0].as_ptr() as usize + p[0].len() * 4
                }) {
                    (unsafe { gplanes[0].as_ptr().add(y0 * w) }, (h * w) as isize)
                } else {
                    if buf.len() < k * n {
                        buf.resize(k * n, 0.0);
                    }
                    im2col_rows(c, gplanes, w, h, g.pad_left, g.pad_top, ow, y0, y1, &mut buf[..k * n]);
                    (buf.as_ptr(), n as isize)
                };
                let o0 = grp * opg;
                unsafe {
                    let d = dst.0.add(o0 * plane + y0 * ow);
                    gemm::gemm(
                        opg,
                        n,
                        k,
                        d,
                        1,
                        plane as isize,
                        false,
                        weight.as_ptr().add(o0 * k),
                        1,
                        k as isize,
                        rhs,
                        1,
                        rhs_rs,
                        0.0,
                        1.0,
                        false,
                        false,
                        false,
                        Parallelism::None,
                    );
                }
                for o in o0..o0 + opg {
                    let row = unsafe { std::slice::from_raw_parts_mut(dst.0.add(o * plane + y0 * ow), n) };
                    let s = ep.slope.as_ref().map(|s| if s.len() == 1 { s[0] } else { s[o] });
                    epilogue_row(row, bias.map(|b| b[o]).unwrap_or(0.0), ep.act, s);
                }
            }
        });
    });
    Ok(out)
}

fn depthwise(c: &Conv, planes: &[&[f32]], w: usize, h: usize, g: reference::ConvGeometry, out: &mut Tensor, ep: &Epilogue) {
    let (oh, ow) = (g.out_h, g.out_w);
    let (kh, kw) = (c.kernel_h, c.kernel_w);
    out.data.par_chunks_mut(oh * ow).enumerate().for_each(|(ch, dst)| {
        let wt = &c.weight[ch * kh * kw..(ch + 1) * kh * kw];
        let src = planes[ch];
        for oy in 0..oh {
            for ox in 0..ow {
                let mut s = 0.0;
                for ky in 0..kh {
                    let iy = (oy * c.stride_h + ky * c.dilation_h) as isize - g.pad_top as isize;
                    for kx in 0..kw {
                        let ix = (ox * c.stride_w + kx * c.dilation_w) as isize - g.pad_left as isize;
                        let v = if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                            c.pad_value
                        } else {
                            src[iy as usize * w + ix as usize]
                        };
                        s += v * wt[ky * kw + kx];
                    }
                }
                dst[oy * ow + ox] = s;
            }
        }
        let sl = ep.slope.as_ref().map(|s| if s.len() == 1 { s[0] } else { s[ch] });
        epilogue_row(dst, c.bias.as_ref().map(|b| b[ch]).unwrap_or(0.0), ep.act, sl);
    });
}

// ---------------------------------------------------------------------------------------------
// deconvolution: col = W^T x in (GEMM), then scatter-add col into the full output

fn pack_deconv(c: &Conv) -> PackedDeconv {
    let (ipg, opg) = (c.in_per_group(), c.out_per_group());
    let kk = c.kernel_h * c.kernel_w;
    let mut wt = vec![0.0; c.num_output * kk * ipg];
    // group g: rows (o_local * kk + r), cols i_local
    for grp in 0..c.group {
        let base = grp * opg * kk * ipg;
        for ol in 0..opg {
            let o = grp * opg + ol;
            for i in 0..ipg {
                for r in 0..kk {
                    wt[base + (ol * kk + r) * ipg + i] = c.weight[(o * ipg + i) * kk + r];
                }
            }
        }
    }
    PackedDeconv { wt }
}

fn deconv_forward(c: &Conv, p: &PackedDeconv, x: &Tensor) -> Result<Tensor> {
    if x.dims != 3 || x.c != c.num_input {
        bail!(Code::InvalidArgument, "deconvolution expects {} input channels, got {}", c.num_input, x.shape_string());
    }
    let (full_w, full_h, cut_l, cut_t, ow, oh) = reference::deconv_geometry(c, x.w, x.h)?;
    let (ipg, opg) = (c.in_per_group(), c.out_per_group());
    let (kh, kw) = (c.kernel_h, c.kernel_w);
    let kk = kh * kw;
    let (h, w) = (x.h, x.w);
    let m = opg * kk;
    let rows = (IM2COL_BUDGET / (m * w).max(1)).clamp(1, h);
    let mut full = vec![0.0f32; c.num_output * full_h * full_w];
    let mut col = vec![0.0f32; m * rows * w];
    let threads = rayon::current_num_threads();
    for grp in 0..c.group {
        let mut y0 = 0;
        while y0 < h {
            let y1 = (y0 + rows).min(h);
            let n = (y1 - y0) * w;
            unsafe {
                gemm::gemm(
                    m,
                    n,
                    ipg,
                    col.as_mut_ptr(),
                    1,
                    n as isize,
                    false,
                    p.wt.as_ptr().add(grp * m * ipg),
                    1,
                    ipg as isize,
                    x.data.as_ptr().add(grp * ipg * h * w + y0 * w),
                    1,
                    (h * w) as isize,
                    0.0,
                    1.0,
                    false,
                    false,
                    false,
                    if threads > 1 { Parallelism::Rayon(threads) } else { Parallelism::None },
                );
            }
            // scatter: channels are independent
            let fp = full_h * full_w;
            full[grp * opg * fp..(grp + 1) * opg * fp].par_chunks_mut(fp).enumerate().for_each(|(ol, dst)| {
                for r in 0..kk {
                    let (ky, kx) = (r / kw, r % kw);
                    let src = &col[(ol * kk + r) * n..(ol * kk + r + 1) * n];
                    for y in y0..y1 {
                        let fy = y * c.stride_h + ky * c.dilation_h;
                        let drow = &mut dst[fy * full_w..(fy + 1) * full_w];
                        let srow = &src[(y - y0) * w..(y - y0 + 1) * w];
                        for (xx, &v) in srow.iter().enumerate() {
                            drow[xx * c.stride_w + kx * c.dilation_w] += v;
                        }
                    }
                }
            });
            y0 = y1;
        }
    }
    let mut out = Tensor::zeros(c.num_output, oh, ow);
    out.data.par_chunks_mut(oh * ow).enumerate().for_each(|(o, dst)| {
        let b = c.bias.as_ref().map(|b| b[o]).unwrap_or(0.0);
        for y in 0..oh {
            let src = &full[(o * full_h + y + cut_t) * full_w + cut_l..][..ow];
            let d = &mut dst[y * ow..(y + 1) * ow];
            d.copy_from_slice(src);
            epilogue_row(d, b, c.activation, None);
        }
    });
    Ok(out)
}
