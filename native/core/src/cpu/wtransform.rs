//! Winograd F(4x4, 3x3) input and output transforms, one vector of tiles at a time, generic over the
//! [`Simd`] vector so each ISA path (and the portable 16-lane test path) runs the same code.
//!
//! Input: for channel `i`, the 6x6 patch of every tile (from the de-interleaved rows the gather
//! wrote) becomes `V[pos][i][tile] = (B^T d B)[pos]`, 36 vectors kept in registers / L1, no
//! intermediate buffer. Output: for out channel `o`, `Y = A^T M A` of each tile, written as 4 output
//! rows of `4 * tp` floats. Matrices (Lavin & Gray, points 0, +-1, +-2, inf):
//! `B^T` rows `[4 0 -5 0 1 0] [0 -4 -4 1 1 0] [0 4 -4 -1 1 0] [0 -2 -1 2 1 0] [0 2 -1 -2 1 0] [0 4 0 -5 0 1]`,
//! `A^T` rows `[1 1 1 1 1 0] [0 1 -1 2 -2 0] [0 1 1 4 4 0] [0 1 -1 8 -8 1]`.
//!
//! Also the gather that feeds the input transform: the 6x6 input patch of every tile of a block, by
//! (row, column within the patch), so a vector of tiles reads contiguous floats. A block is a run of
//! tiles numbered row by row over the map's tile grid, so it may span several tile rows (narrow maps).

use super::isa::Isa;
use super::simd::{Lanes, Simd};
use super::wgemm::Path;

/// `B^T a` for six vectors.
#[inline(always)]
unsafe fn bt<S: Simd>(a: [S::V; 6]) -> [S::V; 6] {
    let (c4, cm4, cm5, c2, cm2) = (S::set1(4.0), S::set1(-4.0), S::set1(-5.0), S::set1(2.0), S::set1(-2.0));
    let a12 = S::add(a[1], a[2]);
    let a34 = S::add(a[3], a[4]);
    let d12 = S::sub(a[1], a[2]);
    let d43 = S::sub(a[4], a[3]);
    let d31 = S::sub(a[3], a[1]);
    let d42 = S::sub(a[4], a[2]);
    [
        S::fma(S::fma(a[4], cm5, a[2]), c4, a[0]),
        S::fma(a34, cm4, a12),
        S::fma(d43, c4, d12),
        S::fma(d42, c2, d31),
        S::fma(d42, cm2, d31),
        S::fma(S::fma(a[5], cm5, a[3]), c4, a[1]),
    ]
}

/// `A^T a` for six vectors: four outputs.
#[inline(always)]
unsafe fn at<S: Simd>(a: [S::V; 6]) -> [S::V; 4] {
    let (c2, c4, c8) = (S::set1(2.0), S::set1(4.0), S::set1(8.0));
    let p12 = S::add(a[1], a[2]);
    let m12 = S::sub(a[1], a[2]);
    let p34 = S::add(a[3], a[4]);
    let m34 = S::sub(a[3], a[4]);
    [S::add(S::add(a[0], p12), p34), S::fma(m12, c2, m34), S::fma(p12, c4, p34), S::fma(S::add(m12, a[5]), c8, m34)]
}

/// `V[pos][i][k]` for channel `i` and tiles `k` in `0..tp` (a multiple of the lanes), from
/// `rows[(r * 6 + l) * n + k]` = row `r`, column `l` of tile `k`'s 6x6 patch (n = tp + 1).
#[inline(always)]
unsafe fn input<S: Simd>(rows: *const f32, n: usize, v: *mut f32, i: usize, ic: usize, tp: usize) {
    let mut k = 0;
    while k < tp {
        input_vec::<S>(rows.add(k), n, v, i, ic, tp, k);
        k += S::LANES;
    }
}

/// One vector of tiles of [`input`]: `rows[(r * 6 + l) * n]` for tiles `k..k + LANES` of `V`.
#[inline(always)]
unsafe fn input_vec<S: Simd>(rows: *const f32, n: usize, v: *mut f32, i: usize, ic: usize, tp: usize, k: usize) {
    let mut h = [[S::zero(); 6]; 6];
    for (r, hr) in h.iter_mut().enumerate() {
        let mut d = [S::zero(); 6];
        for (l, dl) in d.iter_mut().enumerate() {
            *dl = S::load(rows.add((r * 6 + l) * n));
        }
        *hr = bt::<S>(d);
    }
    input_cols::<S>(&h, v, i, ic, tp, k);
}

/// The column half of the input transform: `h` holds `B^T` of each of the 6 patch rows (for one
/// vector of tiles `k..k + LANES`); `V[pos][i][k..]` = `B^T` down each column.
#[inline(always)]
unsafe fn input_cols<S: Simd>(h: &[[S::V; 6]; 6], v: *mut f32, i: usize, ic: usize, tp: usize, k: usize) {
    #[allow(clippy::needless_range_loop)] // column j of the 6x6 tile: a transpose
    for j in 0..6 {
        let o = bt::<S>([h[0][j], h[1][j], h[2][j], h[3][j], h[4][j], h[5][j]]);
        for (rp, ov) in o.iter().enumerate() {
            S::store(v.add(((rp * 6 + j) * ic + i) * tp + k), *ov);
        }
    }
}

/// [`input_vec`] on AVX-512: one vector of 16 tiles from `rows` (`n` floats apart per patch
/// element) into `V[pos][i][k..k + 16]`.
///
/// # Safety
/// `rows` holds `36 * n` floats (from tile `k`'s slot), `v` `36 * ic * tp`; AVX-512F is supported.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn input_vec_avx512(rows: *const f32, n: usize, v: *mut f32, i: usize, ic: usize, tp: usize, k: usize) {
    input_vec::<super::simd::Avx512>(rows, n, v, i, ic, tp, k)
}

/// The input transform of the 16 tiles `tc0..tc0 + 16` of tile row `tr` (all inside the tile grid)
/// straight from `plane`, without the gather: each of the 6 patch rows is 5 masked loads (the pad
/// value outside the map) de-interleaved in registers into the patch's 6 columns, then as
/// [`input_vec`] into `V[pos][i][k..k + 16]`.
///
/// # Safety
/// `v` holds `36 * ic * tp` floats, `k + 16 <= tp`, `tc0 + 16` tiles fit the map's tile row,
/// `tr` is one of its tile rows; AVX-512F is supported.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn input_direct_avx512(plane: &[f32], geo: &Geo, tr: usize, tc0: usize, v: *mut f32, i: usize, ic: usize, tp: usize, k: usize) {
    use std::arch::x86_64::*;
    type S = super::simd::Avx512;
    let pv = _mm512_set1_ps(geo.pv);
    let x0 = (tc0 * 4) as isize - geo.pl as isize;
    // Lanes of load q (columns x0 + 16 q ..) inside [0, w); the fifth load feeds columns 4 and 5 of the
    // last tile only (its lanes 0 and 1).
    let mut masks = [0u16; 5];
    for (q, m) in masks.iter_mut().enumerate() {
        let start = x0 + 16 * q as isize;
        let lo = (-start).clamp(0, 16) as u32;
        let hi = (geo.w as isize - start).clamp(0, 16) as u32;
        let keep: u32 = if q == 4 { 0b11 } else { 0xffff };
        *m = if hi > lo { ((((1u64 << hi) - 1) as u32 & !((1u32 << lo) - 1)) & keep) as u16 } else { 0 };
    }
    // Columns 4 j + l, 4 j + l + 1 of a 32-float pair (a, b), j in 0..8, in the low / high halves.
    let idx01 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    let idx23 = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
    let mut h = [[_mm512_setzero_ps(); 6]; 6];
    for (r, hr) in h.iter_mut().enumerate() {
        let iy = (tr * 4 + r) as isize - geo.pt as isize;
        let d = if iy < 0 || iy >= geo.h as isize {
            [pv; 6]
        } else {
            // Masked-off lanes are not read (no fault), so the address may lie outside the row.
            let row = plane.as_ptr().wrapping_offset(iy * geo.w as isize + x0);
            let a = _mm512_mask_loadu_ps(pv, masks[0], row);
            let b = _mm512_mask_loadu_ps(pv, masks[1], row.wrapping_add(16));
            let c = _mm512_mask_loadu_ps(pv, masks[2], row.wrapping_add(32));
            let dd = _mm512_mask_loadu_ps(pv, masks[3], row.wrapping_add(48));
            let e = _mm512_mask_loadu_ps(pv, masks[4], row.wrapping_add(64));
            let p01ab = _mm512_permutex2var_ps(a, idx01, b);
            let p01cd = _mm512_permutex2var_ps(c, idx01, dd);
            let p23ab = _mm512_permutex2var_ps(a, idx23, b);
            let p23cd = _mm512_permutex2var_ps(c, idx23, dd);
            let c0 = _mm512_shuffle_f32x4::<0x44>(p01ab, p01cd);
            let c1 = _mm512_shuffle_f32x4::<0xEE>(p01ab, p01cd);
            let c2 = _mm512_shuffle_f32x4::<0x44>(p23ab, p23cd);
            let c3 = _mm512_shuffle_f32x4::<0xEE>(p23ab, p23cd);
            // Columns 4 and 5 of tile j are columns 0 and 1 of tile j + 1 (of e for the last).
            let ei = _mm512_castps_si512(e);
            let c4 = _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(ei, _mm512_castps_si512(c0)));
            let e1 = _mm512_alignr_epi32::<1>(ei, ei);
            let c5 = _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(e1, _mm512_castps_si512(c1)));
            [c0, c1, c2, c3, c4, c5]
        };
        *hr = bt::<S>(d);
    }
    input_cols::<S>(&h, v, i, ic, tp, k);
}

/// Output rows of channel `o`: `y[r * 4 tp + 4 k + q]`, r, q in 0..4, from `M[pos][o][k]`
/// (`ocp` rows of `tp` per position), with `post` applied.
#[inline(always)]
unsafe fn output<S: Simd>(m: *const f32, o: usize, ocp: usize, tp: usize, y: *mut f32, post: Post) {
    let bias = S::set1(post.bias);
    let mut k = 0;
    while k < tp {
        let mut c = [[S::zero(); 4]; 6];
        for (j, cj) in c.iter_mut().enumerate() {
            let mut d = [S::zero(); 6];
            for (i, di) in d.iter_mut().enumerate() {
                *di = S::load(m.add(((i * 6 + j) * ocp + o) * tp + k));
            }
            *cj = at::<S>(d);
        }
        #[allow(clippy::needless_range_loop)] // column r of the 6x4 tile: a transpose
        for r in 0..4 {
            let mut s = at::<S>([c[0][r], c[1][r], c[2][r], c[3][r], c[4][r], c[5][r]]);
            for v in s.iter_mut() {
                *v = S::add(*v, bias);
                if post.relu {
                    *v = S::max(*v, S::zero());
                }
            }
            S::interleave4(s, y.add(r * 4 * tp + 4 * k));
        }
        k += S::LANES;
    }
}

/// Input transform of one channel on `path` (see [`input`]).
///
/// # Safety
/// `rows` holds `36 * (tp + 1)` floats, `v` `36 * ic * tp`; the path's ISA is supported.
pub unsafe fn input_transform(path: Path, rows: *const f32, v: *mut f32, i: usize, ic: usize, tp: usize) {
    let n = tp + 1;
    match path {
        #[cfg(target_arch = "x86_64")]
        Path::Avx512 => input_avx512(rows, n, v, i, ic, tp),
        #[cfg(target_arch = "x86_64")]
        Path::Avx2 => input_avx2(rows, n, v, i, ic, tp),
        Path::Portable16 => input::<Lanes<16>>(rows, n, v, i, ic, tp),
        _ => input::<Lanes<4>>(rows, n, v, i, ic, tp),
    }
}

/// What the output transform adds to each output before storing it: `bias`, then ReLU when `relu`
/// (`max(v, 0)`, 0 for NaN as the epilogue's `f32::max`): a conv's whole epilogue when that is all of it.
#[derive(Clone, Copy, Default)]
pub struct Post {
    pub bias: f32,
    pub relu: bool,
}

/// Output transform of one channel on `path` (see [`output`]).
///
/// # Safety
/// `m` holds `36 * ocp * tp` floats, `y` `16 * tp`; the path's ISA is supported.
pub unsafe fn output_transform(path: Path, m: *const f32, o: usize, ocp: usize, tp: usize, y: *mut f32, post: Post) {
    match path {
        #[cfg(target_arch = "x86_64")]
        Path::Avx512 => output_avx512(m, o, ocp, tp, y, post),
        #[cfg(target_arch = "x86_64")]
        Path::Avx2 => output_avx2(m, o, ocp, tp, y, post),
        Path::Portable16 => output::<Lanes<16>>(m, o, ocp, tp, y, post),
        _ => output::<Lanes<4>>(m, o, ocp, tp, y, post),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn input_avx2(rows: *const f32, n: usize, v: *mut f32, i: usize, ic: usize, tp: usize) {
    input::<super::simd::Avx2>(rows, n, v, i, ic, tp)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn input_avx512(rows: *const f32, n: usize, v: *mut f32, i: usize, ic: usize, tp: usize) {
    input::<super::simd::Avx512>(rows, n, v, i, ic, tp)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn output_avx2(m: *const f32, o: usize, ocp: usize, tp: usize, y: *mut f32, post: Post) {
    output::<super::simd::Avx2>(m, o, ocp, tp, y, post)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn output_avx512(m: *const f32, o: usize, ocp: usize, tp: usize, y: *mut f32, post: Post) {
    output::<super::simd::Avx512>(m, o, ocp, tp, y, post)
}

/// Ask for the input rows the next channel's gather will read (they come from L3 or memory: one
/// plane per channel, so the hardware prefetcher cannot see the jump; measured ~10% of a dense
/// block's time on Zen 3 went to these misses before).
#[inline]
pub fn prefetch_tiles(plane: &[f32], geo: &Geo, tw: usize, t0: usize, t: usize) {
    for (_, tr, tc, ts) in segments(tw, t0, t) {
        prefetch_rows(plane, geo, tr, tc, ts);
    }
}

/// The runs of one tile row among the tiles [t0, t0 + t) of a map `tw` tiles wide (numbered row by
/// row): (index of the run's first tile within the block, tile row, first tile column, tiles).
pub fn segments(tw: usize, t0: usize, t: usize) -> impl Iterator<Item = (usize, usize, usize, usize)> {
    let mut k = 0;
    std::iter::from_fn(move || {
        (k < t).then(|| {
            let (tr, tc) = ((t0 + k) / tw, (t0 + k) % tw);
            let ts = (tw - tc).min(t - k);
            let seg = (k, tr, tc, ts);
            k += ts;
            seg
        })
    })
}

#[inline]
fn prefetch_rows(plane: &[f32], geo: &Geo, tr: usize, k0: usize, t: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let x0 = (k0 * 4).saturating_sub(geo.pl).min(geo.w);
        let x1 = (k0 * 4 + 4 * t + 2).saturating_sub(geo.pl).min(geo.w);
        for r in 0..6 {
            let iy = (tr * 4 + r) as isize - geo.pt as isize;
            if iy < 0 || iy >= geo.h as isize || x1 <= x0 {
                continue;
            }
            let row = &plane[iy as usize * geo.w + x0..iy as usize * geo.w + x1];
            for x in (0..row.len()).step_by(16).chain(std::iter::once(row.len() - 1)) {
                // SAFETY: a prefetch of an in-bounds address has no effect on memory.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(row.as_ptr().add(x) as *const i8) };
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (plane, geo, tr, k0, t);
}

#[derive(Clone, Copy)]
pub struct Geo {
    pub w: usize,
    pub h: usize,
    pub pl: usize,
    pub pt: usize,
    pub pv: f32,
}

/// The 6x6 input patches of the tiles [t0, t0 + t) of a map `tw` tiles wide (numbered row by row; a
/// block may span several tile rows), by column within the patch:
/// `rows[(r * 6 + l) * (tp + 1) + k] = in[4 tr + r - pt][4 tc + l - pl]` for tile t0 + k at (tr, tc)
/// (pad value outside the map); the pad tiles [t, tp) read the pad value.
#[allow(clippy::too_many_arguments)]
pub fn gather_tiles(isa: Isa, plane: &[f32], geo: &Geo, tw: usize, t0: usize, t: usize, tp: usize, rows: &mut [f32]) {
    let n = tp + 1;
    assert!(rows.len() >= 36 * n && t <= tp);
    for (k, tr, tc, ts) in segments(tw, t0, t) {
        // Columns 0..4 of tiles k..k + ts, and of one tile more (the next tile's columns 0, 1 are this
        // one's 4, 5; the extra slot is overwritten by the next run, or is slot tp).
        match isa {
            // SAFETY: the backend only pins levels the CPU supports.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { gather_rows_avx512(plane, geo, tr, tc, ts, rows, n, k) },
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { gather_rows_avx2(plane, geo, tr, tc, ts, rows, n, k) },
            _ => gather_rows_body::<false>(plane, geo, tr, tc, ts, rows, n, k),
        }
        for r in 0..6 {
            for l in 0..2 {
                let src = (r * 6 + l) * n + k + 1;
                rows.copy_within(src..src + ts, (r * 6 + 4 + l) * n + k);
            }
        }
    }
    if t < tp {
        for r in 0..36 {
            rows[r * n + t..r * n + tp].fill(geo.pv);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn gather_rows_avx2(plane: &[f32], geo: &Geo, tr: usize, k0: usize, t: usize, rows: &mut [f32], n: usize, off: usize) {
    gather_rows_body::<true>(plane, geo, tr, k0, t, rows, n, off)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn gather_rows_avx512(plane: &[f32], geo: &Geo, tr: usize, k0: usize, t: usize, rows: &mut [f32], n: usize, off: usize) {
    gather_rows_body::<true>(plane, geo, tr, k0, t, rows, n, off)
}

/// Columns 0..4 of the patches of tile row `tr`, tiles [k0, k0 + t + 1), into
/// `rows[(r * 6 + l) * n + off + k]` (l in 0..4). `AVX2`: use the AVX2 de-interleave (only
/// instantiated inside `avx2`-enabled functions).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn gather_rows_body<const AVX2: bool>(plane: &[f32], geo: &Geo, tr: usize, k0: usize, t: usize, rows: &mut [f32], stride: usize, off: usize) {
    let n = t + 1;
    let x0 = (k0 * 4) as isize - geo.pl as isize;
    // Tiles [lo, hi) have their whole 4-wide group inside the row.
    let lo = if x0 < 0 { ((-x0) as usize).div_ceil(4) } else { 0 }.min(n);
    let hi = ((geo.w as isize - x0).max(0) as usize / 4).clamp(lo, n);
    // Tiles [out, n) lie wholly right of the row (pad tiles of the last block among them).
    let out = ((geo.w as isize - x0).max(0) as usize).div_ceil(4).clamp(hi, n);
    for r in 0..6 {
        let iy = (tr * 4 + r) as isize - geo.pt as isize;
        // dst[l * stride + k]: column l of tile k0 + k.
        let dst = &mut rows[r * 6 * stride + off..r * 6 * stride + off + 3 * stride + n];
        if iy < 0 || iy >= geo.h as isize {
            for l in 0..4 {
                dst[l * stride..l * stride + n].fill(geo.pv);
            }
            continue;
        }
        let src = &plane[iy as usize * geo.w..(iy as usize + 1) * geo.w];
        let edge = |dst: &mut [f32], k: usize| {
            let x = x0 + 4 * k as isize;
            for l in 0..4 {
                let xi = x + l as isize;
                dst[l * stride + k] = if xi >= 0 && xi < geo.w as isize { src[xi as usize] } else { geo.pv };
            }
        };
        for k in (0..lo).chain(hi..out) {
            edge(dst, k);
        }
        if out < n {
            for l in 0..4 {
                dst[l * stride + out..l * stride + n].fill(geo.pv);
            }
        }
        let mut k = lo;
        #[cfg(target_arch = "x86_64")]
        if AVX2 {
            while k + 8 <= hi {
                let x = (x0 + 4 * k as isize) as usize;
                // SAFETY: the caller enabled AVX2; src[x..x + 32] is inside the row (k + 7 < hi),
                // and dst[l * stride + k..+8] for l < 4 is in bounds since k + 8 <= n.
                unsafe { deinterleave8_avx2(src[x..x + 32].as_ptr(), dst.as_mut_ptr().add(k), stride) };
                k += 8;
            }
        }
        while k < hi {
            let x = (x0 + 4 * k as isize) as usize;
            let s = &src[x..x + 4];
            for l in 0..4 {
                dst[l * stride + k] = s[l];
            }
            k += 1;
        }
    }
}

/// `dst[l * n + j] = src[4 j + l]` for l in 0..4, j in 0..8.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
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
