//! Winograd F(4x4, 3x3) convolution for 3x3, stride-1, dilation-1, ungrouped convs (the bulk of
//! every SR network here): 36 multiplies per 4x4 output tile and channel pair instead of 144.
//!
//! Per block of up to [`CHUNK`] tiles along one tile row:
//! 1. input transform V = B^T d B of each 6x6 input patch, laid out `V[pos][ic][tile]`;
//! 2. 36 GEMMs `M[pos] (oc x tiles) = U[pos] (oc x ic) * V[pos] (ic x tiles)` ([`super::wgemm`]),
//!    where U = G g G^T are the transformed weights, packed once at prepare time in the
//!    micro-kernel's order for the backend's ISA;
//! 3. inverse transform Y = A^T M A of each tile, written to the output, then the fused epilogue.
//!
//! The tile count of a block is padded to the ISA's vector width (`tp`; the pad tiles read the pad
//! value and their results are dropped), so every loop runs on whole vectors. The transforms run
//! along the tile axis (contiguous), so they vectorise; they are compiled once per ISA level
//! (plain, AVX2+FMA, AVX-512F) and the backend's level picks one.
//! Matrices (Lavin & Gray, points 0, +-1, +-2, inf). In f32 the error relative to direct
//! convolution is ~1e-6 of the output scale for these networks (see the tests below).

use super::epilogue::RowOps;
use super::isa::Isa;
use super::wgemm::{self, Layout};
use super::SendPtr;
use crate::ncnn::model::Conv;
use crate::reference::ConvGeometry;
use crate::tensor::Tensor;
use rayon::prelude::*;
use std::cell::RefCell;

const POS: usize = 36;
/// Tiles per block (V and M are 36 x 64 x CHUNK floats each for 64 channels). 64 measured ~12%
/// faster than 32 (fewer, larger GEMM calls) on Zen 3.
const CHUNK: usize = 64;

/// Transformed weights, packed by [`wgemm::pack_a`] for `isa`: per position, `ocp x ic`.
pub struct Packed {
    u: Vec<f32>,
    ic: usize,
    oc: usize,
    /// `oc` rounded up to the micro-kernel's row block.
    ocp: usize,
    isa: Isa,
}

/// Whether a conv can (and should) run as Winograd F(4x4, 3x3).
pub fn applies(c: &Conv) -> bool {
    c.kernel_w == 3
        && c.kernel_h == 3
        && c.stride_w == 1
        && c.stride_h == 1
        && c.dilation_w == 1
        && c.dilation_h == 1
        && c.group == 1
        && c.num_input >= 8
        && c.num_output >= 8
}

pub fn pack(c: &Conv, isa: Isa) -> Packed {
    const G: [[f64; 3]; 6] = [
        [1.0 / 4.0, 0.0, 0.0],
        [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
        [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
        [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
        [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
        [0.0, 0.0, 1.0],
    ];
    let (ic, oc) = (c.num_input, c.num_output);
    let mut u = vec![0.0f32; POS * oc * ic];
    for o in 0..oc {
        for i in 0..ic {
            let g = &c.weight[(o * ic + i) * 9..(o * ic + i + 1) * 9];
            // tmp = G g (6x3), U = tmp G^T (6x6)
            let mut tmp = [[0.0f64; 3]; 6];
            for (r, row) in tmp.iter_mut().enumerate() {
                for (cc, v) in row.iter_mut().enumerate() {
                    *v = (0..3).map(|k| G[r][k] * g[k * 3 + cc] as f64).sum();
                }
            }
            for r in 0..6 {
                for s in 0..6 {
                    let v: f64 = (0..3).map(|k| tmp[r][k] * G[s][k]).sum();
                    u[((r * 6 + s) * oc + o) * ic + i] = v as f32;
                }
            }
        }
    }
    let l = Layout::of(isa);
    Packed { u: wgemm::pack_a(&u, POS, oc, ic, l), ic, oc, ocp: l.rows_padded(oc), isa }
}

thread_local! {
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Tiles per block along a tile row: [`CHUNK`] (or `LUCENT_CPU_WINO_CHUNK`, for measurements), cut
/// down so that there are at least 4 blocks per thread when the map is small, never below one
/// vector of tiles; rounded to whole vectors so only a row's last block carries pad tiles.
fn chunk_tiles(tw: usize, th: usize, lanes: usize) -> usize {
    use std::sync::OnceLock;
    static CH: OnceLock<usize> = OnceLock::new();
    let base = *CH.get_or_init(|| std::env::var("LUCENT_CPU_WINO_CHUNK").ok().and_then(|v| v.parse().ok()).filter(|&v| v > 0).unwrap_or(CHUNK));
    let threads = rayon::current_num_threads().max(1);
    let mut chunk = base.min(tw);
    while chunk > lanes && th * tw.div_ceil(chunk) < 4 * threads {
        chunk = (chunk / 2).max(lanes);
    }
    if chunk < tw {
        chunk = chunk.div_ceil(lanes) * lanes;
    }
    chunk.min(tw).max(1)
}

/// Run the conv: `planes` are the input channels (h x w each), `out` is num_output x out_h x out_w.
#[allow(clippy::too_many_arguments)]
pub fn forward(c: &Conv, p: &Packed, planes: &[&[f32]], w: usize, h: usize, g: ConvGeometry, out: &mut Tensor, ops: &RowOps) {
    let (ic, oc, ocp) = (p.ic, p.oc, p.ocp);
    let (oh, ow) = (g.out_h, g.out_w);
    let (th, tw) = (oh.div_ceil(4), ow.div_ceil(4));
    let l = Layout::of(p.isa);
    let chunk = chunk_tiles(tw, th, l.lanes);
    let nchunks = tw.div_ceil(chunk);
    let dst = SendPtr(out.data.as_mut_ptr());
    let geo = Geo { w, h, pl: g.pad_left, pt: g.pad_top, pv: c.pad_value };
    let isa = p.isa;
    (0..th * nchunks).into_par_iter().for_each(|bi| {
        let dst = dst;
        let tr = bi / nchunks;
        let k0 = (bi % nchunks) * chunk;
        let k1 = (k0 + chunk).min(tw);
        let t = k1 - k0;
        let tp = l.tiles_padded(t);
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            let rows_len = 6 * 4 * (tp + 1);
            let need = rows_len + 56 * tp + POS * ic * tp + POS * ocp * tp;
            if s.len() < need {
                s.resize(need, 0.0);
            }
            let (rows, rest) = s.split_at_mut(rows_len);
            let (hbuf, rest) = rest.split_at_mut(56 * tp);
            let (v, rest) = rest.split_at_mut(POS * ic * tp);
            let m = &mut rest[..POS * ocp * tp];
            for (i, plane) in planes.iter().enumerate() {
                gather_rows(isa, plane, &geo, tr, k0, tp, rows);
                input_transform(isa, rows, hbuf, v, i, ic, tp);
            }
            let batch = wgemm::Batch {
                npos: POS,
                rows: ocp,
                k: ic,
                tp,
                a: p.u.as_ptr(),
                a_stride: ocp * ic,
                b: v.as_ptr(),
                b_stride: ic * tp,
                ldb: tp,
                c: m.as_mut_ptr(),
                c_stride: ocp * tp,
                ldc: tp,
            };
            // SAFETY: u holds POS packed ocp x ic panels, v POS ic x tp, m POS ocp x tp; the
            // backend only pins an ISA the CPU supports, and `pack` used the same one.
            unsafe { wgemm::run(isa, &batch) };
            let oy0 = tr * 4;
            let rows_out = (oh - oy0).min(4);
            let ox0 = k0 * 4;
            let cols = (ow - ox0).min(4 * t);
            for o in 0..oc {
                let (work, ybuf) = hbuf.split_at_mut(40 * tp);
                output_transform(isa, m, o, ocp, tp, work, ybuf);
                for r in 0..rows_out {
                    let off = (oy0 + r) * ow + ox0;
                    // SAFETY: blocks write disjoint (rows, cols) ranges of each output plane.
                    let seg = unsafe { std::slice::from_raw_parts_mut(dst.0.add(o * oh * ow + off), cols) };
                    seg.copy_from_slice(&ybuf[r * 4 * tp..r * 4 * tp + cols]);
                    ops.apply(o, off, seg);
                }
            }
        });
    });
}

struct Geo {
    w: usize,
    h: usize,
    pl: usize,
    pt: usize,
    pv: f32,
}

/// The 6 input rows of tile row `tr`, tiles [k0, k0 + t), de-interleaved by phase:
/// `rows[(r * 4 + l) * (t + 1) + k] = in[4 tr + r - pt][4 (k0 + k) + l - pl]` (pad value outside).
fn gather_rows(isa: Isa, plane: &[f32], geo: &Geo, tr: usize, k0: usize, t: usize, rows: &mut [f32]) {
    let n = t + 1;
    for r in 0..6 {
        let iy = (tr * 4 + r) as isize - geo.pt as isize;
        let dst = &mut rows[r * 4 * n..(r + 1) * 4 * n];
        if iy < 0 || iy >= geo.h as isize {
            dst.fill(geo.pv);
            continue;
        }
        let src = &plane[iy as usize * geo.w..(iy as usize + 1) * geo.w];
        let x0 = (k0 * 4) as isize - geo.pl as isize;
        // k range whose whole 4-wide group is inside the row
        let inside = |k: usize| {
            let x = x0 + 4 * k as isize;
            x >= 0 && x + 4 <= geo.w as isize
        };
        let simd = isa >= Isa::Avx2;
        let mut k = 0;
        while k < n {
            let x = x0 + 4 * k as isize;
            #[cfg(target_arch = "x86_64")]
            if simd && k + 8 <= n && inside(k) && inside(k + 7) {
                // 8 tiles (32 floats) at once.
                // SAFETY: AVX2 is present; src[x..x + 32] is in bounds (inside(k + 7)), and
                // dst[l * n + k..+8] for l < 4 is in bounds since k + 8 <= n.
                unsafe { deinterleave8_avx2(src[x as usize..x as usize + 32].as_ptr(), dst.as_mut_ptr().add(k), n) };
                k += 8;
                continue;
            }
            let _ = simd;
            if inside(k) {
                let s = &src[x as usize..x as usize + 4];
                for l in 0..4 {
                    dst[l * n + k] = s[l];
                }
            } else {
                for l in 0..4 {
                    let xi = x + l as isize;
                    dst[l * n + k] = if xi >= 0 && xi < geo.w as isize { src[xi as usize] } else { geo.pv };
                }
            }
            k += 1;
        }
    }
}

/// `dst[l * n + j] = src[4 j + l]` for l in 0..4, j in 0..8.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn deinterleave8_avx2(src: *const f32, dst: *mut f32, n: usize) {
    use std::arch::x86_64::*;
    let a = _mm256_loadu_ps(src);
    let b = _mm256_loadu_ps(src.add(8));
    let c = _mm256_loadu_ps(src.add(16));
    let d = _mm256_loadu_ps(src.add(24));
    let t0 = _mm256_unpacklo_ps(a, b); // a0 b0 a1 b1 | a4 b4 a5 b5
    let t1 = _mm256_unpackhi_ps(a, b); // a2 b2 a3 b3 | a6 b6 a7 b7
    let t2 = _mm256_unpacklo_ps(c, d);
    let t3 = _mm256_unpackhi_ps(c, d);
    // Phase l of tiles in the order 0 2 4 6 1 3 5 7, then put back in order.
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    let p0 = _mm256_permutevar8x32_ps(_mm256_shuffle_ps::<0x44>(t0, t2), order);
    let p1 = _mm256_permutevar8x32_ps(_mm256_shuffle_ps::<0xEE>(t0, t2), order);
    let p2 = _mm256_permutevar8x32_ps(_mm256_shuffle_ps::<0x44>(t1, t3), order);
    let p3 = _mm256_permutevar8x32_ps(_mm256_shuffle_ps::<0xEE>(t1, t3), order);
    _mm256_storeu_ps(dst, p0);
    _mm256_storeu_ps(dst.add(n), p1);
    _mm256_storeu_ps(dst.add(2 * n), p2);
    _mm256_storeu_ps(dst.add(3 * n), p3);
}

fn input_transform(isa: Isa, rows: &[f32], hbuf: &mut [f32], v: &mut [f32], i: usize, ic: usize, t: usize) {
    match isa {
        // SAFETY: the backend only pins levels the CPU supports.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { input_transform_avx512(rows, hbuf, v, i, ic, t) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { input_transform_avx2(rows, hbuf, v, i, ic, t) },
        _ => input_transform_body(rows, hbuf, v, i, ic, t),
    }
}

fn output_transform(isa: Isa, m: &[f32], o: usize, oc: usize, t: usize, work: &mut [f32], y: &mut [f32]) {
    match isa {
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { output_transform_avx512(m, o, oc, t, work, y) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { output_transform_avx2(m, o, oc, t, work, y) },
        _ => output_transform_body(m, o, oc, t, work, y),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn input_transform_avx2(rows: &[f32], hbuf: &mut [f32], v: &mut [f32], i: usize, ic: usize, t: usize) {
    input_transform_body(rows, hbuf, v, i, ic, t)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn output_transform_avx2(m: &[f32], o: usize, oc: usize, t: usize, work: &mut [f32], y: &mut [f32]) {
    output_transform_body(m, o, oc, t, work, y)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn input_transform_avx512(rows: &[f32], hbuf: &mut [f32], v: &mut [f32], i: usize, ic: usize, t: usize) {
    input_transform_body(rows, hbuf, v, i, ic, t)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn output_transform_avx512(m: &[f32], o: usize, oc: usize, t: usize, work: &mut [f32], y: &mut [f32]) {
    output_transform_body(m, o, oc, t, work, y)
}

/// B^T applied to six inputs (one column or row of a 6x6 patch), element-wise over tiles.
#[inline(always)]
fn bt6(d: [&[f32]; 6], out: [&mut [f32]; 6], t: usize) {
    let [o0, o1, o2, o3, o4, o5] = out;
    let (d0, d1, d2, d3, d4, d5) = (&d[0][..t], &d[1][..t], &d[2][..t], &d[3][..t], &d[4][..t], &d[5][..t]);
    let (o0, o1, o2, o3, o4, o5) = (&mut o0[..t], &mut o1[..t], &mut o2[..t], &mut o3[..t], &mut o4[..t], &mut o5[..t]);
    for k in 0..t {
        let (a0, a1, a2, a3, a4, a5) = (d0[k], d1[k], d2[k], d3[k], d4[k], d5[k]);
        o0[k] = 4.0 * a0 - 5.0 * a2 + a4;
        o1[k] = -4.0 * (a1 + a2) + (a3 + a4);
        o2[k] = 4.0 * (a1 - a2) + (a4 - a3);
        o3[k] = 2.0 * (a3 - a1) + (a4 - a2);
        o4[k] = 2.0 * (a1 - a3) + (a4 - a2);
        o5[k] = 4.0 * a1 - 5.0 * a3 + a5;
    }
}

/// V[pos][i][k] for channel `i` from its de-interleaved rows.
#[inline(always)]
fn input_transform_body(rows: &[f32], hbuf: &mut [f32], v: &mut [f32], i: usize, ic: usize, t: usize) {
    let n = t + 1;
    // Horizontal pass on each of the 6 rows: the patch column l of tile k is phase l % 4 at k + l / 4.
    for r in 0..6 {
        let ph = |l: usize| &rows[(r * 4 + l % 4) * n + l / 4..];
        let (h0, rest) = hbuf[r * 6 * t..(r + 1) * 6 * t].split_at_mut(t);
        let (h1, rest) = rest.split_at_mut(t);
        let (h2, rest) = rest.split_at_mut(t);
        let (h3, rest) = rest.split_at_mut(t);
        let (h4, h5) = rest.split_at_mut(t);
        bt6([ph(0), ph(1), ph(2), ph(3), ph(4), ph(5)], [h0, h1, h2, h3, h4, h5], t);
    }
    // Vertical pass for each column j: V[(r' * 6 + j)][i][k].
    for j in 0..6 {
        let src = |r: usize| &hbuf[(r * 6 + j) * t..(r * 6 + j + 1) * t];
        let d = [src(0), src(1), src(2), src(3), src(4), src(5)];
        // Six destinations, pos = r' * 6 + j, each a distinct slice of v.
        let base = |rp: usize| ((rp * 6 + j) * ic + i) * t;
        let mut outs: [&mut [f32]; 6] = Default::default();
        let mut rest: &mut [f32] = v;
        let mut taken = 0;
        for (rp, slot) in outs.iter_mut().enumerate() {
            let start = base(rp) - taken;
            let tmp = std::mem::take(&mut rest);
            let (_, tail) = tmp.split_at_mut(start);
            let (s, tail) = tail.split_at_mut(t);
            *slot = s;
            rest = tail;
            taken = base(rp) + t;
        }
        bt6(d, outs, t);
    }
}

/// A^T applied to six values, element-wise over tiles: four outputs.
#[inline(always)]
fn at6(d: [&[f32]; 6], out: [&mut [f32]; 4], t: usize) {
    let [o0, o1, o2, o3] = out;
    let (d0, d1, d2, d3, d4, d5) = (&d[0][..t], &d[1][..t], &d[2][..t], &d[3][..t], &d[4][..t], &d[5][..t]);
    let (o0, o1, o2, o3) = (&mut o0[..t], &mut o1[..t], &mut o2[..t], &mut o3[..t]);
    for k in 0..t {
        let (a0, a1, a2, a3, a4, a5) = (d0[k], d1[k], d2[k], d3[k], d4[k], d5[k]);
        let (p12, m12, p34, m34) = (a1 + a2, a1 - a2, a3 + a4, a3 - a4);
        o0[k] = a0 + p12 + p34;
        o1[k] = m12 + 2.0 * m34;
        o2[k] = p12 + 4.0 * p34;
        o3[k] = m12 + 8.0 * m34 + a5;
    }
}

/// Output rows of channel `o` for the block, interleaved: `y[r * 4t + 4k + q]`, r, q in 0..4.
/// `work` holds 40 t floats.
#[inline(always)]
fn output_transform_body(m: &[f32], o: usize, oc: usize, t: usize, work: &mut [f32], y: &mut [f32]) {
    let (cols, s) = work[..40 * t].split_at_mut(24 * t);
    // Vertical pass for each patch column j: cols[j][r][k] = sum_i AT[r][i] M[i * 6 + j][o][k].
    for j in 0..6 {
        let src = |i: usize| &m[((i * 6 + j) * oc + o) * t..((i * 6 + j) * oc + o + 1) * t];
        let (c0, rest) = cols[j * 4 * t..(j + 1) * 4 * t].split_at_mut(t);
        let (c1, rest) = rest.split_at_mut(t);
        let (c2, c3) = rest.split_at_mut(t);
        at6([src(0), src(1), src(2), src(3), src(4), src(5)], [c0, c1, c2, c3], t);
    }
    // Horizontal pass for each output row r: s[q][k] = sum_j AT[q][j] cols[j][r][k], then interleave.
    for r in 0..4 {
        let src = |j: usize| &cols[(j * 4 + r) * t..(j * 4 + r + 1) * t];
        {
            let (s0, rest) = s.split_at_mut(t);
            let (s1, rest) = rest.split_at_mut(t);
            let (s2, s3) = rest.split_at_mut(t);
            at6([src(0), src(1), src(2), src(3), src(4), src(5)], [s0, s1, s2, &mut s3[..t]], t);
        }
        let row = &mut y[r * 4 * t..(r + 1) * 4 * t];
        for (k, d) in row.chunks_exact_mut(4).enumerate() {
            d[0] = s[k];
            d[1] = s[t + k];
            d[2] = s[2 * t + k];
            d[3] = s[3 * t + k];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ncnn::model::Activation;
    use crate::reference;

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (*seed >> 40) as f32 / (1u64 << 24) as f32
    }

    fn conv(ic: usize, oc: usize, pad: usize, pad_value: f32, seed: &mut u64) -> Conv {
        let weight = (0..oc * ic * 9).map(|_| (lcg(seed) - 0.5) * 0.2).collect();
        let bias = Some((0..oc).map(|_| lcg(seed) - 0.5).collect());
        Conv {
            num_output: oc,
            num_input: ic,
            group: 1,
            kernel_w: 3,
            kernel_h: 3,
            dilation_w: 1,
            dilation_h: 1,
            stride_w: 1,
            stride_h: 1,
            pad: crate::ncnn::model::Padding::Explicit { left: pad, right: pad, top: pad, bottom: pad },
            pad_value,
            output_pad_right: 0,
            output_pad_bottom: 0,
            output_w: 0,
            output_h: 0,
            weight,
            bias,
            activation: Activation::None,
        }
    }

    /// Against the direct reference conv, on sizes that are and are not multiples of the tile,
    /// wider than one chunk, with and without padding.
    #[test]
    fn matches_reference() {
        let mut seed = 7u64;
        for &(ic, oc, w, h, pad, pv) in &[
            (8, 8, 4, 4, 1, 0.0),
            (16, 24, 13, 7, 1, 0.0),
            (64, 64, 150, 9, 1, 0.0),
            (12, 9, 11, 10, 0, 0.0),
            (9, 16, 6, 5, 2, 0.5),
            (64, 48, 37, 21, 1, 0.0),
        ] {
            let c = conv(ic, oc, pad, pv, &mut seed);
            let x = Tensor::from_vec(ic, h, w, (0..ic * h * w).map(|_| lcg(&mut seed)).collect());
            let want = reference::conv(&c, &x).unwrap();
            let g = reference::conv_geometry(&c, w, h).unwrap();
            for isa in Isa::ALL.into_iter().filter(|i| i.supported()) {
                let p = pack(&c, isa);
                let planes: Vec<&[f32]> = (0..ic).map(|i| x.channel(i)).collect();
                let mut got = Tensor::zeros(oc, g.out_h, g.out_w);
                let ops = RowOps { isa, bias: c.bias.as_deref(), act: Activation::None, slope: None, residual: &[], plane: g.out_h * g.out_w };
                forward(&c, &p, &planes, w, h, g, &mut got, &ops);
                assert_eq!((got.c, got.h, got.w), (want.c, want.h, want.w));
                let scale = want.data.iter().fold(1.0f32, |m, v| m.max(v.abs()));
                let err = got.data.iter().zip(&want.data).fold(0.0f32, |m, (a, b)| m.max((a - b).abs())) / scale;
                assert!(err < 1e-5, "{isa}: ic {ic} oc {oc} {w}x{h} pad {pad}: rel err {err:e}");
            }
        }
    }
}
