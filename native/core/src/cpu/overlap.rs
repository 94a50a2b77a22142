//! Overlapping cross-attention (HAT's OCAB, [`Op::OverlapAttention`]) on the CPU backend, laid out
//! as [`super::attention`] runs WindowAttention: one task per (head, query window) on the rayon
//! pool the caller installs; qᵀ (scaled), kᵀ and vᵀ gathered row by row into contiguous buffers
//! (zeros outside the blob); then 16 queries at a time in the vector lanes: scores against 4 keys
//! at a time, softmax (attention.rs's `softmax_exp`), `attn·v` for 4 channels at a time. The score
//! and `attn·v` loops are written with intrinsics per ISA level ([`Lanes`]: AVX-512F, AVX2, plain
//! arrays otherwise). Scores `q·scale·k + bias`, the softmax sums and `attn·v` keep the
//! reference's operations and order (bit-identical: no fused multiply-add) except `exp`, which is
//! [`super::vmath::exp`] (relative error < 2e-7): a few 1e-6 relative at worst (the f32 sums over
//! Nk keys amplify exp's last-bit differences).
//!
//! Speed (HAT's shape: 180 channels, 6 heads, window 16, overlap 24, 64 x 64, 2 threads, AVX-512
//! on an AMD EPYC): ~17 ms against the reference's ~700 ms (`examples/attention_bench.rs`).
//!
//! Invalid operands are not judged here: [`forward`] returns None and the caller runs the
//! reference op, which gives the error.

use super::attention::{softmax_exp, QB};
use super::isa::Isa;
use super::simd::{self, Simd};
use crate::ncnn::model::Op;
use crate::tensor::Tensor;
use rayon::prelude::*;

/// What every (window, head) task of one OverlapAttention reads.
struct Overlaps<'a> {
    x: &'a [f32],
    scale: f32,
    /// Blob height and width, channels per q / k / v, per head.
    h: usize,
    w: usize,
    c: usize,
    d: usize,
    /// Query window side, key window side, its offset above/left of the query window, query
    /// windows per row.
    ws: usize,
    ows: usize,
    pad: usize,
    nwx: usize,
    /// Query and key tokens per window, `nq` rounded up to QB.
    nq: usize,
    nk: usize,
    nqp: usize,
    /// The bias per head and block of QB queries, key-major with the queries in the lanes:
    /// `bias_t[((hd·nqp/QB + i/QB)·nk + j)·QB + i%QB]`, zero past nq (empty: none).
    bias_t: Vec<f32>,
}

/// Copies the `side x side` square of `plane` (a `h x w` frame) whose top-left pixel is
/// (y0, x0) into `dst` row by row, each value times `scale`, zeros outside the frame.
#[inline(always)]
fn gather(plane: &[f32], (h, w): (usize, usize), (y0, x0): (isize, isize), side: usize, scale: f32, dst: &mut [f32]) {
    let (xa, xb) = (x0.clamp(0, w as isize), (x0 + side as isize).clamp(0, w as isize));
    for (ky, row) in dst.chunks_exact_mut(side).enumerate() {
        let y = y0 + ky as isize;
        if y < 0 || y >= h as isize || xa >= xb {
            row.fill(0.0);
            continue;
        }
        let (a, b) = ((xa - x0) as usize, (xb - x0) as usize);
        row[..a].fill(0.0);
        let src = &plane[y as usize * w + xa as usize..y as usize * w + xb as usize];
        row[a..b].iter_mut().zip(src).for_each(|(d, &v)| *d = v * scale);
        row[b..].fill(0.0);
    }
}

/// Per-task buffers: qᵀ (d x nqp, scaled, zero past nq), kᵀ and vᵀ (d x nk), one query block's
/// scores (nk x QB: key-major, query lanes), one block's outputs (d rows of QB).
#[derive(Default)]
struct Scratch {
    qt: Vec<f32>,
    kt: Vec<f32>,
    vt: Vec<f32>,
    s: Vec<f32>,
    rows: Vec<[f32; QB]>,
}

/// QB f32 lanes as `N` vectors of one ISA's [`Simd`] (AVX-512: 1, AVX2: 2, portable: one array of
/// QB), with the few plain IEEE operations the kernels use (no fused multiply-add: the reference
/// rounds products and sums apart). Written with the vector types rather than left to the
/// auto-vectoriser, which split these loops across keys instead of lanes and spilled the
/// accumulators.
///
/// # Safety
/// Pointers must be valid for QB floats; the x86 vectors may only be used inside code compiled
/// with their target feature (everything here is inlined into it).
#[derive(Clone, Copy)]
struct Wide<S: Simd, const N: usize>([S::V; N]);

trait Lanes: Copy {
    unsafe fn zero() -> Self;
    unsafe fn splat(v: f32) -> Self;
    unsafe fn load(p: *const f32) -> Self;
    unsafe fn store(self, p: *mut f32);
    unsafe fn add(self, b: Self) -> Self;
    unsafe fn mul(self, b: Self) -> Self;
    unsafe fn div(self, b: Self) -> Self;
    /// `self > b ? self : b` per lane.
    unsafe fn max(self, b: Self) -> Self;
}

impl<S: Simd, const N: usize> Lanes for Wide<S, N> {
    #[inline(always)]
    unsafe fn zero() -> Self {
        debug_assert_eq!(N * S::LANES, QB);
        Wide([S::zero(); N])
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        Wide([S::set1(v); N])
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        Wide(std::array::from_fn(|i| S::load(p.add(i * S::LANES))))
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        for (i, v) in self.0.into_iter().enumerate() {
            S::store(p.add(i * S::LANES), v);
        }
    }
    #[inline(always)]
    unsafe fn add(self, b: Self) -> Self {
        Wide(std::array::from_fn(|i| S::add(self.0[i], b.0[i])))
    }
    #[inline(always)]
    unsafe fn mul(self, b: Self) -> Self {
        Wide(std::array::from_fn(|i| S::mul(self.0[i], b.0[i])))
    }
    #[inline(always)]
    unsafe fn div(self, b: Self) -> Self {
        Wide(std::array::from_fn(|i| S::div(self.0[i], b.0[i])))
    }
    #[inline(always)]
    unsafe fn max(self, b: Self) -> Self {
        Wide(std::array::from_fn(|i| S::max(self.0[i], b.0[i])))
    }
}

/// Any CPU: one plain array of QB.
type Portable = Wide<simd::Lanes<QB>, 1>;

/// Scores of the QB queries from `i0` (qᵀ, rows of nqp, scaled) against keys `j0 .. j0 + J` (kᵀ,
/// rows of nk): Σ_e q[e]·k[j][e] summed over e in order from 0, then + bias (the block's slab,
/// nk x QB, or empty): the reference's operations and order. Updates the running maxima `m`;
/// stores the scores at `s[j][lane]`.
#[inline(always)]
fn scores<V: Lanes, const J: usize>(qt: &[f32], (nqp, i0): (usize, usize), kt: &[f32], (nk, j0): (usize, usize), bias: &[f32], m: &mut V, s: &mut [f32]) {
    let d = qt.len() / nqp;
    assert!(i0 + QB <= nqp && j0 + J <= nk && kt.len() >= d * nk && s.len() >= nk * QB && (bias.is_empty() || bias.len() >= nk * QB));
    // SAFETY: q rows i0 .. i0 + QB of d rows of nqp, k values j0 .. j0 + J of d rows of nk,
    // bias and s rows j < nk of QB: all in bounds by the assertion; the caller runs V's ISA.
    unsafe {
        let mut acc = [V::zero(); J];
        let (q, k) = (qt.as_ptr().add(i0), kt.as_ptr().add(j0));
        for e in 0..d {
            let qv = V::load(q.add(e * nqp));
            for (jj, a) in acc.iter_mut().enumerate() {
                *a = a.add(qv.mul(V::splat(*k.add(e * nk + jj))));
            }
        }
        for (jj, mut a) in acc.into_iter().enumerate() {
            let j = j0 + jj;
            if !bias.is_empty() {
                a = a.add(V::load(bias.as_ptr().add(j * QB)));
            }
            *m = a.max(*m);
            a.store(s.as_mut_ptr().add(j * QB));
        }
    }
}

/// `out[e][l] = Σ_j p[j][l]·v[j][e] / total[l]` for the E channels from e0 (vᵀ, rows of nk),
/// summed over j in order from 0 (the reference's order).
#[inline(always)]
fn attn_v<V: Lanes, const E: usize>(p: &[f32], vt: &[f32], (nk, e0): (usize, usize), total: V, out: &mut [[f32; QB]]) {
    assert!(p.len() >= nk * QB && vt.len() >= (e0 + E) * nk && out.len() >= e0 + E);
    // SAFETY: p rows j < nk of QB, v rows e0 .. e0 + E of nk: in bounds by the assertion; the
    // caller runs V's ISA.
    unsafe {
        let mut acc = [V::zero(); E];
        let v = vt.as_ptr().add(e0 * nk);
        for j in 0..nk {
            let pj = V::load(p.as_ptr().add(j * QB));
            for (ee, a) in acc.iter_mut().enumerate() {
                *a = a.add(pj.mul(V::splat(*v.add(ee * nk + j))));
            }
        }
        for (o, a) in out[e0..e0 + E].iter_mut().zip(acc) {
            a.div(total).store(o.as_mut_ptr());
        }
    }
}

/// Window `win`, head `hd`: `out` (d x nqp, channel-major) gets softmax(q·kᵀ·scale + bias)·v for
/// the window's query tokens (values past nq and at tokens outside the blob are never read).
#[inline(always)]
fn overlap_task_body<V: Lanes>(g: &Overlaps, win: usize, hd: usize, sc: &mut Scratch, out: &mut [f32]) {
    let (nq, nk, nqp, d) = (g.nq, g.nk, g.nqp, g.d);
    let (y0, x0) = ((win / g.nwx) * g.ws, (win % g.nwx) * g.ws);
    sc.qt.resize(d * nqp, 0.0);
    sc.kt.resize(d * nk, 0.0);
    sc.vt.resize(d * nk, 0.0);
    sc.s.resize(nk * QB, 0.0);
    sc.rows.resize(d, [0.0; QB]);
    let (hw, frame) = (g.h * g.w, (g.h, g.w));
    let (q0, k0) = ((y0 as isize, x0 as isize), ((y0 as isize - g.pad as isize), (x0 as isize - g.pad as isize)));
    for e in 0..d {
        let plane = |c: usize| &g.x[c * hw..(c + 1) * hw];
        let ch = hd * d + e;
        let qt = &mut sc.qt[e * nqp..(e + 1) * nqp];
        gather(plane(ch), frame, q0, g.ws, g.scale, &mut qt[..nq]);
        qt[nq..].fill(0.0);
        gather(plane(g.c + ch), frame, k0, g.ows, 1.0, &mut sc.kt[e * nk..(e + 1) * nk]);
        gather(plane(2 * g.c + ch), frame, k0, g.ows, 1.0, &mut sc.vt[e * nk..(e + 1) * nk]);
    }
    for i0 in (0..nqp).step_by(QB) {
        // Blocks of queries outside the frame only (the last windows' bottom rows) are skipped.
        if (i0..nq.min(i0 + QB)).all(|t| y0 + t / g.ws >= g.h || x0 + t % g.ws >= g.w) {
            continue;
        }
        let slab = (hd * nqp + i0) * nk;
        let bias = if g.bias_t.is_empty() { &[][..] } else { &g.bias_t[slab..slab + nk * QB] };
        // SAFETY: the caller runs V's ISA.
        let mut m = unsafe { V::splat(f32::NEG_INFINITY) };
        // Keys, then channels, 4 at a time, then one by one.
        let (n4, d4) = (nk / 4 * 4, d / 4 * 4);
        for j0 in (0..n4).step_by(4) {
            scores::<V, 4>(&sc.qt, (nqp, i0), &sc.kt, (nk, j0), bias, &mut m, &mut sc.s);
        }
        for j in n4..nk {
            scores::<V, 1>(&sc.qt, (nqp, i0), &sc.kt, (nk, j), bias, &mut m, &mut sc.s);
        }
        let mut mx = [0f32; QB];
        // SAFETY: mx holds QB floats; the caller runs V's ISA.
        unsafe { m.store(mx.as_mut_ptr()) };
        let total = softmax_exp(&mut sc.s[..nk * QB], &mx);
        // SAFETY: as above.
        let total = unsafe { V::load(total.as_ptr()) };
        for e0 in (0..d4).step_by(4) {
            attn_v::<V, 4>(&sc.s, &sc.vt, (nk, e0), total, &mut sc.rows);
        }
        for e in d4..d {
            attn_v::<V, 1>(&sc.s, &sc.vt, (nk, e), total, &mut sc.rows);
        }
        for (e, r) in sc.rows.iter().enumerate() {
            out[e * nqp + i0..e * nqp + i0 + QB].copy_from_slice(r);
        }
    }
}

/// [`overlap_task_body`] compiled for `isa` with its lanes.
fn overlap_task(isa: Isa, g: &Overlaps, win: usize, hd: usize, sc: &mut Scratch, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2(g: &Overlaps, win: usize, hd: usize, sc: &mut Scratch, out: &mut [f32]) {
        overlap_task_body::<Wide<simd::Avx2, 2>>(g, win, hd, sc, out)
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn avx512(g: &Overlaps, win: usize, hd: usize, sc: &mut Scratch, out: &mut [f32]) {
        overlap_task_body::<Wide<simd::Avx512, 1>>(g, win, hd, sc, out)
    }
    match isa {
        // SAFETY: the backend only pins levels the CPU supports (Isa::supported).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { avx512(g, win, hd, sc, out) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { avx2(g, win, hd, sc, out) },
        _ => overlap_task_body::<Portable>(g, win, hd, sc, out),
    }
}

/// The op on `x`, or None when `op` is no OverlapAttention or its operands are not valid (the
/// caller then runs the reference, which says why).
pub fn forward(op: &Op, x: &Tensor, isa: Isa) -> Option<Tensor> {
    let Op::OverlapAttention(p) = op else { return None };
    if x.dims != 3 || x.h == 0 || x.w == 0 || x.c == 0 || x.data.len() != x.c * x.h * x.w {
        return None;
    }
    let (ws, ows, heads) = (p.window, p.overlap, p.heads);
    if heads == 0 || ws == 0 || ows < ws || !(ows - ws).is_multiple_of(2) || !x.c.is_multiple_of(3 * heads) {
        return None;
    }
    let (nq, nk) = (ws * ws, ows * ows);
    let (c, h, w) = (x.c / 3, x.h, x.w);
    if !p.bias.is_empty() && p.bias.len() != heads * nq * nk {
        return None;
    }
    let d = c / heads;
    let (nwy, nwx) = (h.div_ceil(ws), w.div_ceil(ws));
    let nwin = nwy * nwx;
    let nqp = nq.next_multiple_of(QB);
    // The bias rearranged, one task per head and block of queries (QB source rows).
    let mut bias_t = vec![0f32; if p.bias.is_empty() { 0 } else { heads * nqp * nk }];
    bias_t.par_chunks_mut(QB * nk).enumerate().for_each(|(k, slab)| {
        let (hd, i0) = (k / (nqp / QB), k % (nqp / QB) * QB);
        for (l, i) in (i0..nq.min(i0 + QB)).enumerate() {
            let src = &p.bias[(hd * nq + i) * nk..(hd * nq + i + 1) * nk];
            for (dst, &b) in slab[l..].iter_mut().step_by(QB).zip(src) {
                *dst = b;
            }
        }
    });
    let g = Overlaps { x: &x.data, scale: p.scale, h, w, c, d, ws, ows, pad: (ows - ws) / 2, nwx, nq, nk, nqp, bias_t };
    // Results per (head, window), d x nqp each (head-major: a thread's consecutive tasks share
    // their head's bias); small tasks are grouped to ~64k multiply-adds.
    let mut res = vec![0f32; nwin * heads * d * nqp];
    let min_len = (65_536 / (nk * nqp * d).max(1)).max(1);
    res.par_chunks_mut(d * nqp)
        .enumerate()
        .with_min_len(min_len)
        .for_each_init(Scratch::default, |s, (task, out)| overlap_task(isa, &g, task % nwin, task / nwin, s, out));
    let mut out = Tensor::zeros(c, h, w);
    out.data.par_chunks_mut(h * w).enumerate().for_each(|(ch, dst)| {
        let (hd, e) = (ch / d, ch % d);
        for win in 0..nwin {
            let r = &res[((hd * nwin + win) * d + e) * nqp..][..nq];
            let (y0, x0) = ((win / nwx) * ws, (win % nwx) * ws);
            for (ty, row) in r.chunks_exact(ws).enumerate().take(h.saturating_sub(y0)) {
                let n = ws.min(w - x0);
                dst[(y0 + ty) * w + x0..][..n].copy_from_slice(&row[..n]);
            }
        }
    });
    Some(out)
}
