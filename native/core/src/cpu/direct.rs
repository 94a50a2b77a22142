//! Direct convolution for large kernels (7x7 and up, stride 1, no dilation, one group), e.g.
//! RealPLKSR's 17x17 conv over 16 channels: there im2col copies `k² · C` floats per output pixel
//! for only `C_out` multiply-adds per copied float, and the copy costs as much as the product.
//!
//! Also 3x3 and larger convs with at most [`NARROW`] outputs (U²-Net's 64 -> 1 side outputs), one
//! output per block (`OB` 1, `NX` 4; 2 portable): im2col's product there is a single row; and 3x3
//! and larger convs over at most 4 inputs (a first conv on RGB), where im2col's inner dimension is short.
//!
//! Output rows are cut into blocks spread over the rayon pool; a block's input rows are padded into
//! a per-thread buffer of at most [`PAD_BUDGET`] floats (pad value around, zeros past the right
//! edge up to a whole number of vector blocks), so the padded copy stays in cache rather than
//! making a second whole-map copy. Then for each output row and block of `OB` output channels, strips of `NX`
//! vectors of outputs are accumulated in registers over every (input channel, ky, kx): `NX` input
//! loads and `OB` weight broadcasts feed `OB · NX` FMAs. AVX-512F: OB 8, NX 3 (24 accumulators);
//! AVX2: OB 4, NX 2; the portable path: 8 lanes, OB 4, NX 2. Each finished row gets the conv's
//! epilogue while in cache.

use super::ptr::SendPtr;
use super::epilogue::RowOps;
use super::isa::Isa;
use super::simd::{Lanes, Simd};
use crate::ncnn::model::Conv;
use crate::reference::ConvGeometry;
use crate::tensor::Tensor;
use rayon::prelude::*;

/// Whether [`forward`] runs `c`.
pub fn fits(c: &Conv) -> bool {
    let plain = c.group == 1 && c.stride_w == 1 && c.stride_h == 1 && c.dilation_w == 1 && c.dilation_h == 1;
    plain && ((c.kernel_w >= 7 && c.kernel_h >= 7) || ((narrow(c) || shallow(c)) && c.kernel_w * c.kernel_h >= 9))
}

/// Few inputs (a network's first conv on RGB): im2col's inner dimension would be only `k² · C`
/// (27 for 3x3 over 3 channels), too short for the GEMM to pay for the copy.
fn shallow(c: &Conv) -> bool {
    c.num_input <= 4
}

/// Few outputs (U²-Net's 64 -> 1 side outputs): one output per block, so no FMA is spent on
/// padding outputs, and im2col's `k² · C`-float copy per pixel would feed a single multiply-add each.
fn narrow(c: &Conv) -> bool {
    c.num_output <= NARROW
}

/// Floats of padded input per job (1 MB: the rows a job reads stay in L2).
const PAD_BUDGET: usize = 1 << 18;

/// Outputs up to which [`narrow`] blocks run one output at a time.
const NARROW: usize = 2;

/// `out` (num_output x out_h x out_w) = conv of `planes` (w x h each) with its epilogue `ops`.
pub fn forward(c: &Conv, planes: &[&[f32]], w: usize, h: usize, g: ConvGeometry, out: &mut Tensor, ops: &RowOps) {
    match ops.isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if narrow(c) => forward_with::<super::simd::Avx512, 1, 4>(c, planes, w, h, g, out, ops, row_avx512_1),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => forward_with::<super::simd::Avx512, 8, 3>(c, planes, w, h, g, out, ops, row_avx512),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 if narrow(c) => forward_with::<super::simd::Avx2, 1, 4>(c, planes, w, h, g, out, ops, row_avx2_1),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => forward_with::<super::simd::Avx2, 4, 2>(c, planes, w, h, g, out, ops, row_avx2),
        _ if narrow(c) => forward_with::<Lanes<8>, 1, 2>(c, planes, w, h, g, out, ops, row_portable_1),
        _ => forward_with::<Lanes<8>, 4, 2>(c, planes, w, h, g, out, ops, row_portable),
    }
}

/// The padded input and packed weights of one run, and where a row job reads them.
struct Job<'a> {
    pad: &'a [f32],
    pw: usize,
    ph: usize,
    ci: usize,
    kh: usize,
    kw: usize,
    xw: usize,
}

/// Computes output row `y` of the `OB` outputs whose packed weights start at `wp` into `acc`
/// (OB x xw). Unsafe: `wp` must hold `ci·kh·kw·OB` floats, `acc` OB x xw, `y < out_h`, and the CPU
/// must support the ISA the function is compiled for.
type RowFn = unsafe fn(&Job, *const f32, usize, &mut [f32]);

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn row_avx512(j: &Job, wp: *const f32, y: usize, acc: &mut [f32]) {
    row::<super::simd::Avx512, 8, 3>(j, wp, y, acc)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn row_avx2(j: &Job, wp: *const f32, y: usize, acc: &mut [f32]) {
    row::<super::simd::Avx2, 4, 2>(j, wp, y, acc)
}

unsafe fn row_portable(j: &Job, wp: *const f32, y: usize, acc: &mut [f32]) {
    row::<Lanes<8>, 4, 2>(j, wp, y, acc)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn row_avx512_1(j: &Job, wp: *const f32, y: usize, acc: &mut [f32]) {
    row::<super::simd::Avx512, 1, 4>(j, wp, y, acc)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn row_avx2_1(j: &Job, wp: *const f32, y: usize, acc: &mut [f32]) {
    row::<super::simd::Avx2, 1, 4>(j, wp, y, acc)
}

unsafe fn row_portable_1(j: &Job, wp: *const f32, y: usize, acc: &mut [f32]) {
    row::<Lanes<8>, 1, 2>(j, wp, y, acc)
}

#[inline(always)]
unsafe fn row<S: Simd, const OB: usize, const NX: usize>(j: &Job, wp: *const f32, y: usize, acc: &mut [f32]) {
    for x0 in (0..j.xw).step_by(S::LANES * NX) {
        strip_block::<S, OB, NX>(j.pad, j.pw, j.ph, j.ci, j.kh, j.kw, wp, y, x0, acc.as_mut_ptr(), j.xw);
    }
}

#[allow(clippy::too_many_arguments)]
fn forward_with<S: Simd, const OB: usize, const NX: usize>(c: &Conv, planes: &[&[f32]], w: usize, h: usize, g: ConvGeometry, out: &mut Tensor, ops: &RowOps, row_fn: RowFn) {
    let (kh, kw, ci, co) = (c.kernel_h, c.kernel_w, c.num_input, c.num_output);
    let (oh, ow) = (g.out_h, g.out_w);
    let strip = S::LANES * NX;
    let xw = ow.div_ceil(strip) * strip;
    // Output rows per job: enough jobs for every thread, and a padded slice that stays in cache.
    let pw = xw + kw - 1;
    let threads = rayon::current_num_threads().max(1);
    let by_cache = (PAD_BUDGET / (ci * pw).max(1)).saturating_sub(kh - 1).max(1);
    let rows = oh.div_ceil(threads * 4).min(by_cache).max(1);
    // Weights: [o block][i][ky][kx][OB], zero for outputs past num_output.
    let nob = co.div_ceil(OB);
    let per_block = ci * kh * kw * OB;
    let mut wp = vec![0.0f32; nob * per_block];
    for o in 0..co {
        let (b, ol) = (o / OB, o % OB);
        for i in 0..ci {
            for k in 0..kh * kw {
                wp[b * per_block + (i * kh * kw + k) * OB + ol] = c.weight[(o * ci + i) * kh * kw + k];
            }
        }
    }
    let plane = oh * ow;
    let dst = SendPtr(out.data.as_mut_ptr());
    (0..oh.div_ceil(rows)).into_par_iter().for_each_init(
        || (Vec::new(), vec![0.0f32; OB * xw]),
        |(pad, acc), job| {
            #[allow(clippy::redundant_locals)] // moves the whole Send wrapper into the closure (not its field)
            let dst = dst;
            let (y0, y1) = (job * rows, (job * rows + rows).min(oh));
            // This job's padded input: rows y0 - pad_top .. y1 + kh - 1 - pad_top, columns
            // -pad_left .. xw + kw - 1 - pad_left (pad value around, zeros past the output's right edge).
            let ph = y1 - y0 + kh - 1;
            pad.clear();
            pad.resize(ci * ph * pw, c.pad_value);
            for (dst, src) in pad.chunks_mut(ph * pw).zip(planes) {
                for yy in 0..ph {
                    let Some(iy) = ((y0 + yy) as isize - g.pad_top as isize).try_into().ok().filter(|&iy: &usize| iy < h) else { continue };
                    let row = &mut dst[yy * pw..(yy + 1) * pw];
                    let x0 = g.pad_left.min(pw);
                    let n = w.min(pw - x0);
                    row[x0..x0 + n].copy_from_slice(&src[iy * w..iy * w + n]);
                    // Past the output's right edge: zeros (those outputs are dropped).
                    let valid = (ow + kw - 1).min(pw);
                    row[valid..].fill(0.0);
                }
            }
            let j = Job { pad, pw, ph, ci, kh, kw, xw };
            for b in 0..nob {
                for y in y0..y1 {
                    // SAFETY: `wp` holds nob blocks of per_block floats, `acc` OB x xw, y - y0 < ph - kh + 1;
                    // `row_fn` was picked for `ops.isa`, which the backend only pins when the CPU supports it.
                    unsafe { row_fn(&j, wp.as_ptr().add(b * per_block), y - y0, acc) };
                    for ol in 0..OB.min(co - b * OB) {
                        let o = b * OB + ol;
                        // SAFETY: each (o, y) row of the output is written by one job only.
                        let row = unsafe { std::slice::from_raw_parts_mut(dst.0.add(o * plane + y * ow), ow) };
                        row.copy_from_slice(&acc[ol * xw..ol * xw + ow]);
                        ops.apply(o, y * ow, row);
                    }
                }
            }
        },
    );
}

/// `acc[o][x0 .. x0 + LANES·NX]` (row stride `xw`) = the conv of output row `y` for the `OB`
/// outputs whose packed weights start at `wp`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn strip_block<S: Simd, const OB: usize, const NX: usize>(pad: &[f32], pw: usize, ph: usize, ci: usize, kh: usize, kw: usize, wp: *const f32, y: usize, x0: usize, acc_out: *mut f32, xw: usize) {
    let mut acc = [[S::zero(); NX]; OB];
    for i in 0..ci {
        for ky in 0..kh {
            let row = pad.as_ptr().add((i * ph + y + ky) * pw + x0);
            let wrow = wp.add((i * kh + ky) * kw * OB);
            for kx in 0..kw {
                let mut v = [S::zero(); NX];
                for (n, vn) in v.iter_mut().enumerate() {
                    *vn = S::load(row.add(kx + n * S::LANES));
                }
                let wk = wrow.add(kx * OB);
                for (o, acc_o) in acc.iter_mut().enumerate() {
                    let wv = S::splat(wk.add(o));
                    for (a, vn) in acc_o.iter_mut().zip(&v) {
                        *a = S::fma(*a, wv, *vn);
                    }
                }
            }
        }
    }
    for (o, acc_o) in acc.iter().enumerate() {
        for (n, a) in acc_o.iter().enumerate() {
            S::store(acc_out.add(o * xw + x0 + n * S::LANES), *a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ncnn::model::{Activation, Padding};
    use crate::reference;

    fn conv(ci: usize, co: usize, k: usize, pad: usize, pad_value: f32, seed: u32) -> Conv {
        let mut s = seed;
        let mut r = move || {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
        };
        Conv {
            num_output: co,
            num_input: ci,
            group: 1,
            kernel_w: k,
            kernel_h: k,
            dilation_w: 1,
            dilation_h: 1,
            stride_w: 1,
            stride_h: 1,
            pad: Padding::Explicit { left: pad, right: pad, top: pad, bottom: pad },
            pad_value,
            output_pad_right: 0,
            output_pad_bottom: 0,
            output_w: 0,
            output_h: 0,
            weight: (0..co * ci * k * k).map(|_| r()).collect(),
            bias: Some((0..co).map(|_| r()).collect()),
            activation: Activation::LeakyRelu(0.1),
        }
    }

    /// Every ISA level this CPU runs against the reference conv, on sizes that are not multiples
    /// of the blocks (outputs, strips), with and without padding and with a pad value:
    /// max |direct - ref| / max(1, max |ref|) <= 1e-5 (sums of up to 17·17·16 products in [-1, 1)).
    #[test]
    fn direct_matches_the_reference_conv() {
        // Then: narrow (one output per block) 3x3 and 5x5, as U²-Net's 64 -> 1 side outputs; a shallow 3 -> 64 3x3.
        let cases = [(16, 16, 17, 8, 0.0, 37, 29), (3, 5, 7, 3, 0.0, 9, 50), (9, 13, 9, 0, 0.0, 40, 17), (2, 9, 7, 2, 0.5, 21, 33), (64, 1, 3, 1, 0.0, 83, 21), (7, 2, 3, 1, 0.5, 5, 9), (5, 1, 5, 0, 0.0, 70, 11), (3, 64, 3, 1, 0.0, 50, 7)];
        for isa in Isa::ALL.into_iter().filter(|i| i.supported()) {
            for (n, &(ci, co, k, pad, pv, w, h)) in cases.iter().enumerate() {
                let c = conv(ci, co, k, pad, pv, n as u32 + 1);
                assert!(fits(&c));
                let x = Tensor::from_vec(ci, h, w, (0..ci * h * w).map(|i| ((i * 2_654_435_761) % 2001) as f32 / 1000.0 - 1.0).collect());
                let want = reference::conv(&c, &x).unwrap();
                let g = reference::conv_geometry(&c, w, h).unwrap();
                let mut got = Tensor::zeros(co, g.out_h, g.out_w);
                let planes: Vec<&[f32]> = (0..ci).map(|i| x.channel(i)).collect();
                let ops = RowOps { isa, bias: c.bias.as_deref(), act: c.activation, slope: None, residual: &[], plane: g.out_h * g.out_w };
                forward(&c, &planes, w, h, g, &mut got, &ops);
                let peak = want.data.iter().fold(1.0f32, |m, v| m.max(v.abs()));
                let err = got.data.iter().zip(&want.data).fold(0.0f32, |m, (a, b)| m.max((a - b).abs())) / peak;
                assert!(err <= 1e-5, "{isa} case {n}: error {err:e}");
            }
        }
    }
}
