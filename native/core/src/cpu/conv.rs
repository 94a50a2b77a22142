//! Convolution kernels other than Winograd: row-block im2col + GEMM (the `gemm` crate), the
//! depthwise direct loop, large kernels through [`super::direct`], and deconvolution (GEMM then scatter-add). Also [`ConvAlgo`], the
//! per-layer choice between im2col and Winograd, and [`conv_forward`], which runs a conv with its
//! fused epilogue ([`super::epilogue`]) on either.
//!
//! im2col: for each block of output rows the im2col matrix of just those rows is built in a
//! per-thread buffer (bounded to half a core's L2), multiplied by the weight matrix straight into the
//! output tensor, and the epilogue runs on the block while it is still in cache. Row blocks are
//! spread over the backend's rayon pool.

use super::epilogue::{Residual, RowOps};
use super::isa::Isa;
use super::ptr::SendPtr;
use super::{bf16, direct, int8, winograd, Val};
use crate::bail;
use crate::error::{Code, Result};
use crate::ncnn::model::Conv;
use crate::reference;
use crate::tensor::Tensor;
use gemm::Parallelism;
use rayon::prelude::*;
use std::cell::RefCell;

/// Floats of im2col scratch per worker thread (1 MB: half of a Sapphire Rapids core's L2, so the
/// matrix is still in L2 when the GEMM reads it). On the 2-core AVX-512 Xeon (one thread, CPU time,
/// fastest of 3) against the former 8 MB: U²-Net's 64 -> 16 at 320x320 52 -> 30 ms, 64 -> 32 at
/// 320x320 75-82 -> 48-52 ms, 32 -> 32 at 160x160 13-14 -> 5.5 ms; maps whose rows fit either way
/// are unchanged.
const IM2COL_BUDGET: usize = 1 << 18;

/// Floats of the deconvolution's column buffer (8 MB; shared by the threads of its GEMM).
const DECONV_BUDGET: usize = 2 << 20;

/// How a convolution layer runs (decided once, at prepare time: see [`super::calibrate`]).
pub enum ConvAlgo {
    Im2col,
    Winograd(winograd::Packed),
    /// bf16 direct convolution ([`bf16`]).
    Bf16(bf16::Packed),
    /// int8 direct convolution ([`int8`]).
    Int8(int8::Packed),
}

impl ConvAlgo {
    /// `self`, or im2col for a Winograd layer whose map is too narrow for it ([`winograd::fills`]).
    fn filter_winograd(&self, out_w: usize, out_h: usize) -> &ConvAlgo {
        match self {
            ConvAlgo::Winograd(p) if !winograd::fills(p, out_w, out_h) => &ConvAlgo::Im2col,
            a => a,
        }
    }
}

pub struct PackedDeconv {
    /// (num_output * kh * kw) x (num_input / group) per group, row-major.
    wt: Vec<f32>,
}

thread_local! {
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
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

/// Run a conv on `x` with its epilogue: bias, the conv's activation, `slope` (a fused PReLU/ReLU),
/// then `residual` (fused Eltwise/BinaryOp sums; each `other` must have the output's shape).
/// `kept`, when it has one entry per part of `x`, gives kept Winograd input transforms of parts
/// (used when their geometry matches this conv's).
#[allow(clippy::too_many_arguments)]
pub fn conv_forward(c: &Conv, algo: &ConvAlgo, isa: Isa, x: &Val, slope: Option<&[f32]>, residual: &[Residual], kept: &[Option<&winograd::TransformedInput>]) -> Result<Tensor> {
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
    let ops = RowOps { isa, bias: c.bias.as_deref(), act: c.activation, slope, residual, plane };
    if let ConvAlgo::Bf16(p) = algo {
        return Ok(bf16::forward(c, p, &planes, w, h, g, &ops));
    }
    if let ConvAlgo::Int8(p) = algo {
        return Ok(int8::forward(c, p, &planes, w, h, g, &ops));
    }
    let mut out = Tensor::zeros(c.num_output, oh, ow);
    if c.group == c.num_input && c.group == c.num_output {
        depthwise(c, &planes, w, h, g, &mut out, &ops);
        return Ok(out);
    }
    if matches!(algo, ConvAlgo::Im2col) && direct::fits(c) {
        direct::forward(c, &planes, w, h, g, &mut out, &ops);
        return Ok(out);
    }
    if let ConvAlgo::Winograd(p) = algo.filter_winograd(ow, oh) {
        let key = winograd::InputKey::new(c, p, w, h, g);
        let parts = x.parts();
        let sources: Vec<winograd::Source> = if kept.len() == parts.len() && kept.iter().any(|k| k.is_some_and(|t| t.key() == key)) {
            parts
                .iter()
                .zip(kept)
                .map(|(t, k)| match k {
                    Some(tv) if tv.key() == key => winograd::Source::Transformed(tv),
                    _ => winograd::Source::Planes((0..t.c).map(|i| t.channel(i)).collect()),
                })
                .collect()
        } else {
            vec![winograd::Source::Planes(planes)]
        };
        winograd::forward(c, p, &sources, w, h, g, &mut out, &ops);
        return Ok(out);
    }
    let (ipg, opg) = (c.in_per_group(), c.out_per_group());
    let k = ipg * c.kernel_h * c.kernel_w;
    let threads = rayon::current_num_threads().max(1);
    if c.group == 1 && c.kernel_w * c.kernel_h > 1 && oh * ow <= SMALL_MAP && opg >= 32 * threads {
        small_map(c, &planes, w, h, g, &mut out, &ops, k);
        return Ok(out);
    }
    // Rows per block: bounded scratch, and enough blocks to keep every thread busy.
    let by_budget = (IM2COL_BUDGET / k.max(1) / ow.max(1)).max(1);
    let by_threads = oh.div_ceil(threads * 4).max(1);
    let rows = by_budget.min(by_threads).min(oh).max(1);
    let nblocks = oh.div_ceil(rows);
    let direct_1x1 = c.kernel_w == 1 && c.kernel_h == 1 && c.stride_w == 1 && c.stride_h == 1 && g.pad_left == 0 && g.pad_top == 0 && oh == h && ow == w;
    let dst = SendPtr(out.data.as_mut_ptr());
    let weight = &c.weight;
    (0..nblocks).into_par_iter().for_each(|bi| {
        #[allow(clippy::redundant_locals)] // moves the whole Send wrapper into the closure (not its field)
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
                    // SAFETY: blocks write disjoint row ranges of each output plane.
                    let row = unsafe { std::slice::from_raw_parts_mut(dst.0.add(o * plane + y0 * ow), n) };
                    ops.apply(o, y0 * ow, row);
                }
            }
        });
    });
    Ok(out)
}

/// Output pixels up to which [`small_map`] runs a conv (U²-Net's 10x10 maps). On the 2-core
/// AVX-512 Xeon (2 threads, fastest of 3, three alternating rounds) against row blocks: 512 -> 512
/// at 10x10 5.5 -> 3.6 ms, 256 -> 256 dilated 1.45 -> 1.1 ms, 128 -> 128 0.45 -> 0.35 ms; at 20x20
/// it lost (256 -> 256 dilated 3.4 -> 3.9-4.3 ms, 512 -> 256 8.0 -> 8.9 ms).
const SMALL_MAP: usize = 144;

/// im2col + GEMM on a small map with many outputs: one im2col of the whole map (in parallel over
/// input channels), then the output channels split between jobs, so the GEMM packs each weight
/// once rather than once per block of output rows (a 10x10 map made 5 blocks of 2 rows; 512 -> 512
/// 3x3 weights are 9.4 MB).
#[allow(clippy::too_many_arguments)]
fn small_map(c: &Conv, planes: &[&[f32]], w: usize, h: usize, g: reference::ConvGeometry, out: &mut Tensor, ops: &RowOps, k: usize) {
    let (oh, ow) = (g.out_h, g.out_w);
    let n = oh * ow;
    let kk = c.kernel_h * c.kernel_w;
    let mut buf = vec![0.0f32; k * n];
    buf.par_chunks_mut(kk * n).zip(planes.par_iter()).for_each(|(b, p)| im2col_rows(c, &[p], w, h, g.pad_left, g.pad_top, ow, 0, oh, b));
    let co = c.num_output;
    let jobs = (rayon::current_num_threads().max(1) * 2).min(co.div_ceil(16));
    let per = co.div_ceil(jobs).div_ceil(16) * 16;
    let dst = SendPtr(out.data.as_mut_ptr());
    (0..co.div_ceil(per)).into_par_iter().for_each(|j| {
        #[allow(clippy::redundant_locals)] // moves the whole Send wrapper into the closure (not its field)
        let dst = dst;
        let (o0, o1) = (j * per, (j * per + per).min(co));
        // SAFETY: jobs write disjoint output channels; weight holds co x k, buf k x n.
        unsafe {
            gemm::gemm(o1 - o0, n, k, dst.0.add(o0 * n), 1, n as isize, false, c.weight.as_ptr().add(o0 * k), 1, k as isize, buf.as_ptr(), 1, n as isize, 0.0, 1.0, false, false, false, Parallelism::None);
        }
        for o in o0..o1 {
            // SAFETY: channel o is this job's.
            let row = unsafe { std::slice::from_raw_parts_mut(dst.0.add(o * n), n) };
            ops.apply(o, 0, row);
        }
    });
}

fn depthwise(c: &Conv, planes: &[&[f32]], w: usize, h: usize, g: reference::ConvGeometry, out: &mut Tensor, ops: &RowOps) {
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
        ops.apply(ch, 0, dst);
    });
}

// ---------------------------------------------------------------------------------------------
// deconvolution: col = W^T x in (GEMM), then scatter-add col into the full output

pub fn pack_deconv(c: &Conv) -> PackedDeconv {
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

pub fn deconv_forward(c: &Conv, p: &PackedDeconv, isa: Isa, x: &Tensor) -> Result<Tensor> {
    if x.dims != 3 || x.c != c.num_input {
        bail!(Code::InvalidArgument, "deconvolution expects {} input channels, got {}", c.num_input, x.shape_string());
    }
    let (full_w, full_h, cut_l, cut_t, ow, oh) = reference::deconv_geometry(c, x.w, x.h)?;
    let (ipg, opg) = (c.in_per_group(), c.out_per_group());
    let (kh, kw) = (c.kernel_h, c.kernel_w);
    let kk = kh * kw;
    let (h, w) = (x.h, x.w);
    let m = opg * kk;
    let rows = (DECONV_BUDGET / (m * w).max(1)).clamp(1, h);
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
    let ops = RowOps { isa, bias: c.bias.as_deref(), act: c.activation, slope: None, residual: &[], plane: oh * ow };
    out.data.par_chunks_mut(oh * ow).enumerate().for_each(|(o, dst)| {
        for y in 0..oh {
            let src = &full[(o * full_h + y + cut_t) * full_w + cut_l..][..ow];
            let d = &mut dst[y * ow..(y + 1) * ow];
            d.copy_from_slice(src);
            ops.apply(o, y * ow, d);
        }
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ncnn::model::{Activation, Padding};
    use std::sync::Arc;

    /// im2col (row blocks, and [`small_map`] on maps up to [`SMALL_MAP`] pixels with many outputs)
    /// against the reference conv: 3x3, dilation 1 and 2, ReLU, every ISA level this CPU runs, in a
    /// 2-thread pool; max |got - ref| / max(1, max |ref|) <= 1e-5.
    #[test]
    fn im2col_matches_the_reference_conv() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let mut s = 12345u32;
        let mut r = move || {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
        };
        // (in, out, w, h, dilation): small maps with 130 outputs (the small-map path), a 20x20 one (row blocks).
        for &(ci, co, w, h, d) in &[(24, 130, 11, 9, 2), (16, 130, 10, 10, 1), (20, 70, 5, 4, 1), (8, 130, 20, 20, 2)] {
            let c = Conv {
                num_output: co,
                num_input: ci,
                group: 1,
                kernel_w: 3,
                kernel_h: 3,
                dilation_w: d,
                dilation_h: d,
                stride_w: 1,
                stride_h: 1,
                pad: Padding::Explicit { left: d, right: d, top: d, bottom: d },
                pad_value: 0.0,
                output_pad_right: 0,
                output_pad_bottom: 0,
                output_w: 0,
                output_h: 0,
                weight: (0..co * ci * 9).map(|_| r() * 0.3).collect(),
                bias: Some((0..co).map(|_| r()).collect()),
                activation: Activation::Relu,
            };
            let x = Tensor::from_vec(ci, h, w, (0..ci * h * w).map(|_| r()).collect());
            let want = reference::conv(&c, &x).unwrap();
            let v = Val::T(Arc::new(x));
            for isa in Isa::ALL.into_iter().filter(|i| i.supported()) {
                let got = pool.install(|| conv_forward(&c, &ConvAlgo::Im2col, isa, &v, None, &[], &[])).unwrap();
                let peak = want.data.iter().fold(1.0f32, |m, v| m.max(v.abs()));
                let err = got.data.iter().zip(&want.data).fold(0.0f32, |m, (a, b)| m.max((a - b).abs())) / peak;
                assert!(err <= 1e-5, "{isa} {ci}->{co} {w}x{h} d{d}: error {err:e}");
            }
        }
    }
}
