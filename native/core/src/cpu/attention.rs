//! The transformer ops (SwinIR, DAT) on the CPU backend: LayerNorm, exact GELU, reflect padding to
//! a multiple, shifted-window attention and channel attention, spread over the rayon pool the
//! caller installs, each hot loop written over fixed-width lane arrays so that the compiler
//! vectorises it, and compiled once per ISA level (scalar / AVX2+FMA / AVX-512F, as
//! [`super::epilogue`]). Semantics are [`crate::reference`]'s (see the `Op` docs); what differs:
//! - LayerNorm: the same f64 statistics, summed over channels in the same order, vectorised across
//!   pixels: bit-identical to the reference.
//! - GELU: the reference's erf (Abramowitz & Stegun 7.1.26) evaluated in f32 with
//!   [`super::vmath::exp`], `1 + erf` taken as `poly·e^{-a²}` for negative inputs (no
//!   cancellation): within 1e-6 of the reference, relative to max(1, |value|).
//! - WindowAttention: one task per (window, head) with q, k, v gathered into contiguous buffers,
//!   then 16 queries at a time in the vector lanes: scores `q·scale·k + bias [+ mask]`, softmax sums
//!   and `attn·v` in the reference's operations and order (so bit-identical) except `exp`, which is
//!   `vmath::exp` (relative error < 2e-7): ~1e-7 relative overall.
//! - ChannelAttention: the same f64 dot products and norms (summed in lanes: ~1e-15 apart), the
//!   reference's f64 softmax and f32 `A·v` in its order; one task per output row (head x row).
//!
//! Invalid operands are not judged here: [`forward`] returns None and the caller runs the
//! reference op, which gives the error.

use super::isa::Isa;
use super::vmath;
use crate::ncnn::model::{Op, WindowAttention};
use crate::reference::region;
use crate::tensor::Tensor;
use rayon::prelude::*;

/// Lanes of the accumulators: queries per WindowAttention block (two AVX2 vectors, one AVX-512).
pub(super) const QB: usize = 16;
/// Pixels per LayerNorm statistics task and per ChannelAttention chunk.
const PIX_CHUNK: usize = 512;
/// Elements per GELU task.
const GELU_CHUNK: usize = 16 * 1024;
/// A padding token in the window gather tables.
const NONE: u32 = u32::MAX;

/// `$name(isa, args)` runs `$body(args)` compiled for `isa` (the body is `#[inline(always)]`, so
/// each wrapper holds its own vectorised copy).
macro_rules! per_isa {
    ($vis:vis fn $name:ident($($a:ident: $t:ty),* $(,)?) $(-> $r:ty)? = $body:ident) => {
        $vis fn $name(isa: Isa, $($a: $t),*) $(-> $r)? {
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn avx2($($a: $t),*) $(-> $r)? { $body($($a),*) }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f")]
            unsafe fn avx512($($a: $t),*) $(-> $r)? { $body($($a),*) }
            match isa {
                // SAFETY: the backend only pins levels the CPU supports (Isa::supported).
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => unsafe { avx512($($a),*) },
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => unsafe { avx2($($a),*) },
                _ => $body($($a),*),
            }
        }
    };
}

/// The op on `x`, or None when `op` is not a transformer op or its operands are not valid (the
/// caller then runs the reference, which says why).
pub fn forward(op: &Op, x: &Tensor, isa: Isa) -> Option<Tensor> {
    if x.dims != 3 || x.h == 0 || x.w == 0 || x.c == 0 || x.data.len() != x.c * x.h * x.w {
        return None;
    }
    match op {
        Op::LayerNorm { weight, bias, eps } if weight.len() == x.c && bias.len() == x.c => Some(layer_norm(x, weight, bias, *eps, isa)),
        Op::Gelu => Some(gelu(x, isa)),
        Op::PadToMultiple { multiple } => pad_to_multiple(x, *multiple),
        Op::WindowAttention(p) => window_attention(p, x, isa),
        Op::ChannelAttention { heads, temperature } => channel_attention(*heads, temperature, x, isa),
        _ => None,
    }
}

// ---- LayerNorm ------------------------------------------------------------------------------

/// Mean and 1/sqrt(var + eps) of pixels `p0 .. p0 + mean.len()` (f64, channels summed in order).
#[inline(always)]
fn ln_stats_body(x: &[f32], c: usize, p0: usize, eps: f32, mean: &mut [f64], rstd: &mut [f64]) {
    let (n, hw) = (mean.len(), x.len() / c);
    mean.fill(0.0);
    for ch in 0..c {
        let row = &x[ch * hw + p0..ch * hw + p0 + n];
        mean.iter_mut().zip(row).for_each(|(m, &v)| *m += v as f64);
    }
    mean.iter_mut().for_each(|m| *m /= c as f64);
    rstd.fill(0.0);
    for ch in 0..c {
        let row = &x[ch * hw + p0..ch * hw + p0 + n];
        rstd.iter_mut().zip(mean.iter().zip(row)).for_each(|(s, (&m, &v))| *s += (v as f64 - m) * (v as f64 - m));
    }
    rstd.iter_mut().for_each(|s| *s = 1.0 / (*s / c as f64 + eps as f64).sqrt());
}
per_isa!(fn ln_stats(x: &[f32], c: usize, p0: usize, eps: f32, mean: &mut [f64], rstd: &mut [f64]) = ln_stats_body);

#[inline(always)]
fn ln_apply_body(src: &[f32], mean: &[f64], rstd: &[f64], wb: (f32, f32), dst: &mut [f32]) {
    let (w, b) = wb;
    for (d, (&v, (&m, &r))) in dst.iter_mut().zip(src.iter().zip(mean.iter().zip(rstd))) {
        *d = ((v as f64 - m) * r) as f32 * w + b;
    }
}
per_isa!(fn ln_apply(src: &[f32], mean: &[f64], rstd: &[f64], wb: (f32, f32), dst: &mut [f32]) = ln_apply_body);

fn layer_norm(x: &Tensor, weight: &[f32], bias: &[f32], eps: f32, isa: Isa) -> Tensor {
    let (c, hw) = (x.c, x.h * x.w);
    let (mut mean, mut rstd) = (vec![0f64; hw], vec![0f64; hw]);
    let stats = mean.par_chunks_mut(PIX_CHUNK).zip(rstd.par_chunks_mut(PIX_CHUNK));
    stats.enumerate().for_each(|(k, (m, r))| ln_stats(isa, &x.data, c, k * PIX_CHUNK, eps, m, r));
    let mut out = Tensor::zeros(c, x.h, x.w);
    let apply = |(ch, dst): (usize, &mut [f32])| ln_apply(isa, x.channel(ch), &mean, &rstd, (weight[ch], bias[ch]), dst);
    out.data.par_chunks_mut(hw).enumerate().for_each(apply);
    out
}

// ---- GELU -----------------------------------------------------------------------------------

/// The reference's erf coefficients (A&S 7.1.26), rounded to f32.
const ERF: [f32; 5] = [0.254_829_592_f64 as f32, -0.284_496_736_f64 as f32, 1.421_413_741_f64 as f32, -1.453_152_027_f64 as f32, 1.061_405_429_f64 as f32];

/// `x · (1 + erf(x / √2)) / 2` with the reference's erf polynomial, in f32.
#[inline(always)]
fn gelu_f32(v: f32) -> f32 {
    let a = v.abs() * std::f32::consts::FRAC_1_SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t * (ERF[0] + t * (ERF[1] + t * (ERF[2] + t * (ERF[3] + t * ERF[4]))));
    // erf(|x|/√2) = 1 - pe: 1 + erf is 2 - pe above zero and pe below.
    let pe = poly * vmath::exp(-a * a);
    0.5 * v * if v < 0.0 { pe } else { 2.0 - pe }
}

#[inline(always)]
fn gelu_body(src: &[f32], dst: &mut [f32]) {
    dst.iter_mut().zip(src).for_each(|(d, &v)| *d = gelu_f32(v));
}
per_isa!(fn gelu_rows(src: &[f32], dst: &mut [f32]) = gelu_body);

fn gelu(x: &Tensor, isa: Isa) -> Tensor {
    let mut out = Tensor { dims: 3, c: x.c, h: x.h, w: x.w, data: vec![0.0; x.data.len()] };
    out.data.par_chunks_mut(GELU_CHUNK).zip(x.data.par_chunks(GELU_CHUNK)).for_each(|(d, s)| gelu_rows(isa, s, d));
    out
}

// ---- PadToMultiple --------------------------------------------------------------------------

/// Bottom/right reflect padding, one channel per task; None when the reference would refuse it.
fn pad_to_multiple(x: &Tensor, m: usize) -> Option<Tensor> {
    let (h, w) = (x.h, x.w);
    let (oh, ow) = (h.div_ceil(m.max(1)) * m, w.div_ceil(m.max(1)) * m);
    if m == 0 || oh - h >= h || ow - w >= w {
        return None;
    }
    if (oh, ow) == (h, w) {
        return Some(x.clone());
    }
    let mut out = Tensor::zeros(x.c, oh, ow);
    out.data.par_chunks_mut(oh * ow).enumerate().for_each(|(c, dst)| {
        let src = x.channel(c);
        for (y, drow) in dst.chunks_exact_mut(ow).enumerate() {
            let sy = if y < h { y } else { 2 * (h - 1) - y };
            let srow = &src[sy * w..(sy + 1) * w];
            drow[..w].copy_from_slice(srow);
            for (xx, d) in drow.iter_mut().enumerate().skip(w) {
                *d = srow[2 * (w - 1) - xx];
            }
        }
    });
    Some(out)
}

// ---- WindowAttention ------------------------------------------------------------------------

/// What every (window, head) task of one WindowAttention reads.
struct Windows<'a> {
    p: &'a WindowAttention,
    x: &'a [f32],
    /// Plane size of `x`, channels per q / k / v, per head, tokens per window, `n` rounded up to QB.
    hw: usize,
    c: usize,
    d: usize,
    n: usize,
    np: usize,
    /// The bias transposed per head, rows padded to np: `bias_t[(hd·n + j)·np + i]` (empty: none).
    bias_t: Vec<f32>,
    /// Per window and token (row-major in the window): the source pixel in `x` (NONE in the
    /// zero padding) and the Swin mask label.
    pix: Vec<u32>,
    label: Vec<u32>,
    /// Per window: whether its tokens carry different labels (the mask changes something).
    mixed: Vec<bool>,
}

/// Per-task buffers: qᵀ (d x np, scaled, zero past n), k and v (n x d), one query block's scores
/// (n x QB: key-major, query lanes), the window's labels padded to np.
#[derive(Default)]
struct Scratch {
    qt: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    s: Vec<f32>,
    label: Vec<u32>,
}

/// One block of QB queries (from `i0`) of a (window, head) task, for [`score_block`].
struct Block<'a> {
    qt: &'a [f32],
    k: &'a [f32],
    d: usize,
    np: usize,
    i0: usize,
    /// The head's transposed bias (n x np), or empty.
    bias: &'a [f32],
    /// The window's labels (padded to np), when the mask applies.
    label: Option<&'a [u32]>,
    mask_value: f32,
}

/// Σ_e q[e]·k[j][e] of the block's queries against keys `j0 .. j0 + J`, summed over e in order
/// from 0 as the reference does (bit-identical); J independent accumulators.
#[inline(always)]
fn dots<const J: usize>(b: &Block, j0: usize) -> [[f32; QB]; J] {
    let (d, np, i0) = (b.d, b.np, b.i0);
    let mut acc = [[0f32; QB]; J];
    for e in 0..d {
        let q: &[f32; QB] = b.qt[e * np + i0..e * np + i0 + QB].try_into().unwrap();
        for (jj, a) in acc.iter_mut().enumerate() {
            let kv = b.k[(j0 + jj) * d + e];
            for l in 0..QB {
                a[l] += q[l] * kv;
            }
        }
    }
    acc
}

/// Scores of the block's queries against keys `j0 .. j0 + J`: [`dots`], then + bias, then + mask
/// (the reference's order). Updates the running maxima `m`; stores the scores at `s[j][lane]`.
#[inline(always)]
fn score_block<const J: usize>(b: &Block, j0: usize, m: &mut [f32; QB], s: &mut [f32]) {
    let (np, i0) = (b.np, b.i0);
    for (jj, mut a) in dots::<J>(b, j0).into_iter().enumerate() {
        let j = j0 + jj;
        if !b.bias.is_empty() {
            let bias: &[f32; QB] = b.bias[j * np + i0..j * np + i0 + QB].try_into().unwrap();
            for l in 0..QB {
                a[l] += bias[l];
            }
        }
        if let Some(label) = b.label {
            let (li, lj): (&[u32; QB], u32) = (label[i0..i0 + QB].try_into().unwrap(), label[j]);
            for l in 0..QB {
                a[l] += if li[l] != lj { b.mask_value } else { 0.0 };
            }
        }
        for l in 0..QB {
            m[l] = if a[l] > m[l] { a[l] } else { m[l] };
        }
        s[j * QB..(j + 1) * QB].copy_from_slice(&a);
    }
}

/// `s[j][l] = e^(s[j][l] - m[l])`; returns Σ_j s[j][l], summed in order from 0 (the reference's).
#[inline(always)]
pub(super) fn softmax_exp(s: &mut [f32], m: &[f32; QB]) -> [f32; QB] {
    let mut total = [0f32; QB];
    for sj in s.chunks_exact_mut(QB) {
        for l in 0..QB {
            sj[l] = vmath::exp(sj[l] - m[l]);
            total[l] += sj[l];
        }
    }
    total
}

/// `out[e][l] = Σ_j p[j][l]·v[j][e0 + e] / total[l]` for E channels from e0, summed over j in
/// order from 0 (the reference's order).
#[inline(always)]
fn attn_v_block<const E: usize>(p: &[f32], v: &[f32], (n, d): (usize, usize), e0: usize, total: &[f32; QB], out: &mut [[f32; QB]]) {
    let mut acc = [[0f32; QB]; E];
    for j in 0..n {
        let pj = &p[j * QB..(j + 1) * QB];
        for (ee, a) in acc.iter_mut().enumerate() {
            let vv = v[j * d + e0 + ee];
            for l in 0..QB {
                a[l] += pj[l] * vv;
            }
        }
    }
    for (o, a) in out[e0..e0 + E].iter_mut().zip(&acc) {
        for l in 0..QB {
            o[l] = a[l] / total[l];
        }
    }
}

/// Window `win`, head `hd`: `out` (d x np, channel-major) gets softmax(q·kᵀ·scale + bias + mask)·v
/// for the window's tokens (values past n and at padding tokens are never read).
#[inline(always)]
fn window_task_body(g: &Windows, win: usize, hd: usize, sc: &mut Scratch, out: &mut [f32]) {
    let (n, np, d, hw) = (g.n, g.np, g.d, g.hw);
    let pix = &g.pix[win * n..(win + 1) * n];
    sc.qt.resize(d * np, 0.0);
    sc.k.resize(n * d, 0.0);
    sc.v.resize(n * d, 0.0);
    sc.s.resize(n * QB, 0.0);
    sc.label.clear();
    sc.label.extend(g.label[win * n..(win + 1) * n].iter().chain(std::iter::repeat_n(&u32::MAX, np - n)));
    let scale = g.p.scale;
    for e in 0..d {
        let ch = hd * d + e;
        let plane = |c: usize| &g.x[c * hw..(c + 1) * hw];
        let (qp, kp, vp) = (plane(ch), plane(g.c + ch), plane(2 * g.c + ch));
        let qt = &mut sc.qt[e * np..(e + 1) * np];
        for (t, &px) in pix.iter().enumerate() {
            let (qv, kv, vv) = if px == NONE { (0.0, 0.0, 0.0) } else { (qp[px as usize], kp[px as usize], vp[px as usize]) };
            qt[t] = qv * scale;
            sc.k[t * d + e] = kv;
            sc.v[t * d + e] = vv;
        }
        qt[n..].fill(0.0);
    }
    let label = (g.p.masked && g.mixed[win]).then_some(&sc.label[..]);
    let bias = if g.bias_t.is_empty() { &[][..] } else { &g.bias_t[hd * n * np..(hd + 1) * n * np] };
    let mut rows = vec![[0f32; QB]; d];
    for i0 in (0..np).step_by(QB) {
        if pix[i0..n.min(i0 + QB)].iter().all(|&p| p == NONE) {
            continue;
        }
        let b = Block { qt: &sc.qt, k: &sc.k, d, np, i0, bias, label, mask_value: g.p.mask_value };
        let s = &mut sc.s;
        let mut m = [f32::NEG_INFINITY; QB];
        for j0 in (0..n).step_by(4) {
            if j0 + 4 <= n {
                score_block::<4>(&b, j0, &mut m, s);
            } else {
                (j0..n).for_each(|j| score_block::<1>(&b, j, &mut m, s));
            }
        }
        let total = softmax_exp(&mut s[..n * QB], &m);
        for e0 in (0..d).step_by(4) {
            if e0 + 4 <= d {
                attn_v_block::<4>(s, &sc.v, (n, d), e0, &total, &mut rows);
            } else {
                (e0..d).for_each(|e| attn_v_block::<1>(s, &sc.v, (n, d), e, &total, &mut rows));
            }
        }
        for (e, r) in rows.iter().enumerate() {
            out[e * np + i0..e * np + i0 + QB].copy_from_slice(r);
        }
    }
}
per_isa!(fn window_task(g: &Windows, win: usize, hd: usize, s: &mut Scratch, out: &mut [f32]) = window_task_body);

/// Shifted-window attention: the reference's steps, one task per (window, head) (grouped when the
/// windows are small), then the results scattered back to their pixels one channel per task.
fn window_attention(p: &WindowAttention, x: &Tensor, isa: Isa) -> Option<Tensor> {
    let (wh, ww, heads) = (p.win_h, p.win_w, p.heads);
    if heads == 0 || wh == 0 || ww == 0 || p.pad_multiple == 0 || !x.c.is_multiple_of(3 * heads) {
        return None;
    }
    let n = wh * ww;
    if !p.bias.is_empty() && p.bias.len() != heads * n * n {
        return None;
    }
    let (c, h, w) = (x.c / 3, x.h, x.w);
    let d = c / heads;
    let (hp, wp) = (h.div_ceil(p.pad_multiple) * p.pad_multiple, w.div_ceil(p.pad_multiple) * p.pad_multiple);
    if !hp.is_multiple_of(wh) || !wp.is_multiple_of(ww) || p.shift_y >= hp || p.shift_x >= wp || h * w > NONE as usize {
        return None;
    }
    let (nwx, nwin) = (wp / ww, (hp / wh) * (wp / ww));
    let (mut pix, mut label, mut mixed) = (Vec::with_capacity(nwin * n), Vec::with_capacity(nwin * n), Vec::with_capacity(nwin));
    for win in 0..nwin {
        let (wy, wx) = (win / nwx, win % nwx);
        for t in 0..n {
            // Shifted-frame position, then its source in the padded frame.
            let (sy, sx) = (wy * wh + t / ww, wx * ww + t % ww);
            let (py, px) = ((sy + p.shift_y) % hp, (sx + p.shift_x) % wp);
            pix.push(if py < h && px < w { (py * w + px) as u32 } else { NONE });
            label.push((region(sy, hp, wh, p.shift_y) * 3 + region(sx, wp, ww, p.shift_x)) as u32);
        }
        let l = &label[win * n..];
        mixed.push(l.iter().any(|&v| v != l[0]));
    }
    let np = n.next_multiple_of(QB);
    let mut bias_t = vec![0f32; if p.bias.is_empty() { 0 } else { heads * n * np }];
    for (bt, b) in bias_t.chunks_exact_mut(n * np).zip(p.bias.chunks_exact(n * n)) {
        for i in 0..n {
            for j in 0..n {
                bt[j * np + i] = b[i * n + j];
            }
        }
    }
    let g = Windows { p, x: &x.data, hw: h * w, c, d, n, np, bias_t, pix, label, mixed };
    // Results per (window, head), d x np each; small tasks are grouped to ~64k multiply-adds.
    let mut res = vec![0f32; nwin * heads * d * np];
    let min_len = (65_536 / (n * np * d).max(1)).max(1);
    res.par_chunks_mut(d * np)
        .enumerate()
        .with_min_len(min_len)
        .for_each_init(Scratch::default, |s, (task, out)| window_task(isa, &g, task / heads, task % heads, s, out));
    let mut out = Tensor::zeros(c, h, w);
    out.data.par_chunks_mut(h * w).enumerate().for_each(|(ch, dst)| {
        let (hd, e) = (ch / d, ch % d);
        for win in 0..nwin {
            let r = &res[((win * heads + hd) * d + e) * np..][..n];
            for (&px, &v) in g.pix[win * n..(win + 1) * n].iter().zip(r) {
                if px != NONE {
                    dst[px as usize] = v;
                }
            }
        }
    });
    Some(out)
}

// ---- ChannelAttention -----------------------------------------------------------------------

/// What every row task of one ChannelAttention reads (`norms`: max(‖row‖, 1e-12) of the 2c q and
/// k rows).
struct Channels<'a> {
    x: &'a [f32],
    hw: usize,
    c: usize,
    d: usize,
    temperature: &'a [f32],
    norms: Vec<f64>,
}

/// Σ a·b in f64 (each product exact), in 16 lanes.
#[inline(always)]
fn dot64(a: &[f32], b: &[f32]) -> f64 {
    let mut acc = [0f64; QB];
    let (ac, bc) = (a.chunks_exact(QB), b.chunks_exact(QB));
    let tail: f64 = ac.remainder().iter().zip(bc.remainder()).map(|(&x, &y)| x as f64 * y as f64).sum();
    for (x, y) in ac.zip(bc) {
        for l in 0..QB {
            acc[l] += x[l] as f64 * y[l] as f64;
        }
    }
    acc.iter().sum::<f64>() + tail
}

#[inline(always)]
fn sq_norm_body(a: &[f32]) -> f64 {
    dot64(a, a)
}
per_isa!(fn sq_norm(a: &[f32]) -> f64 = sq_norm_body);

/// Output row `o` (head o / d, row o % d): softmax of its scaled cosines with the head's k rows
/// (f64, as the reference), then Σ_j a_j·v_j in f32 in the reference's order.
#[inline(always)]
fn channel_row_body(g: &Channels, o: usize, dst: &mut [f32]) {
    let (hw, c, d) = (g.hw, g.c, g.d);
    let hd = o / d;
    let plane = |ch: usize| &g.x[ch * hw..(ch + 1) * hw];
    let k0 = c + hd * d;
    let mut dots = vec![0f64; d];
    let q = plane(o);
    for p0 in (0..hw).step_by(PIX_CHUNK) {
        let p1 = (p0 + PIX_CHUNK).min(hw);
        for (j, acc) in dots.iter_mut().enumerate() {
            *acc += dot64(&q[p0..p1], &plane(k0 + j)[p0..p1]);
        }
    }
    let temp = g.temperature[hd] as f64;
    for (j, a) in dots.iter_mut().enumerate() {
        *a = *a / (g.norms[o] * g.norms[k0 + j]) * temp;
    }
    let m = dots.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    dots.iter_mut().for_each(|a| *a = (*a - m).exp());
    let total: f64 = dots.iter().sum();
    let wts: Vec<f32> = dots.iter().map(|a| (a / total) as f32).collect();
    for p0 in (0..hw).step_by(PIX_CHUNK) {
        let p1 = (p0 + PIX_CHUNK).min(hw);
        let out = &mut dst[p0..p1];
        for (j, &wj) in wts.iter().enumerate() {
            out.iter_mut().zip(&plane(2 * c + hd * d + j)[p0..p1]).for_each(|(ov, &vv)| *ov += wj * vv);
        }
    }
}
per_isa!(fn channel_row(g: &Channels, o: usize, dst: &mut [f32]) = channel_row_body);

/// Transposed attention: the q / k norms one row per task, then one output row per task (heads x
/// rows of each head).
fn channel_attention(heads: usize, temperature: &[f32], x: &Tensor, isa: Isa) -> Option<Tensor> {
    if heads == 0 || temperature.len() != heads || !x.c.is_multiple_of(3 * heads) {
        return None;
    }
    let (c, hw) = (x.c / 3, x.h * x.w);
    let norms: Vec<f64> = (0..2 * c).into_par_iter().map(|ch| sq_norm(isa, x.channel(ch)).sqrt().max(1e-12)).collect();
    let g = Channels { x: &x.data, hw, c, d: c / heads, temperature, norms };
    let mut out = Tensor::zeros(c, x.h, x.w);
    out.data.par_chunks_mut(hw).enumerate().for_each(|(o, dst)| channel_row(isa, &g, o, dst));
    Some(out)
}
