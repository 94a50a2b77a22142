//! Winograd F(4x4, 3x3) input and output transforms, one vector of tiles at a time, generic over the
//! [`Simd`] vector so each ISA path (and the portable 16-lane test path) runs the same code.
//!
//! Input: for channel `i`, the 6x6 patch of every tile (from the de-interleaved rows the gather
//! wrote) becomes `V[pos][i][tile] = (B^T d B)[pos]`, 36 vectors kept in registers / L1, no
//! intermediate buffer. Output: for out channel `o`, `Y = A^T M A` of each tile, written as 4 output
//! rows of `4 * tp` floats. Matrices (Lavin & Gray, points 0, +-1, +-2, inf):
//! `B^T` rows `[4 0 -5 0 1 0] [0 -4 -4 1 1 0] [0 4 -4 -1 1 0] [0 -2 -1 2 1 0] [0 2 -1 -2 1 0] [0 4 0 -5 0 1]`,
//! `A^T` rows `[1 1 1 1 1 0] [0 1 -1 2 -2 0] [0 1 1 4 4 0] [0 1 -1 8 -8 1]`.

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
/// `rows[(r * 4 + l) * n + k] = in[r][4 k + l]` (n = tp + 1).
#[inline(always)]
unsafe fn input<S: Simd>(rows: *const f32, n: usize, v: *mut f32, i: usize, ic: usize, tp: usize) {
    let mut k = 0;
    while k < tp {
        let mut h = [[S::zero(); 6]; 6];
        for (r, hr) in h.iter_mut().enumerate() {
            let mut d = [S::zero(); 6];
            for (l, dl) in d.iter_mut().enumerate() {
                *dl = S::load(rows.add((r * 4 + l % 4) * n + l / 4 + k));
            }
            *hr = bt::<S>(d);
        }
        for j in 0..6 {
            let o = bt::<S>([h[0][j], h[1][j], h[2][j], h[3][j], h[4][j], h[5][j]]);
            for (rp, ov) in o.iter().enumerate() {
                S::store(v.add(((rp * 6 + j) * ic + i) * tp + k), *ov);
            }
        }
        k += S::LANES;
    }
}

/// Output rows of channel `o`: `y[r * 4 tp + 4 k + q]`, r, q in 0..4, from `M[pos][o][k]`
/// (`ocp` rows of `tp` per position).
#[inline(always)]
unsafe fn output<S: Simd>(m: *const f32, o: usize, ocp: usize, tp: usize, y: *mut f32) {
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
        for r in 0..4 {
            let s = at::<S>([c[0][r], c[1][r], c[2][r], c[3][r], c[4][r], c[5][r]]);
            S::interleave4(s, y.add(r * 4 * tp + 4 * k));
        }
        k += S::LANES;
    }
}

/// Input transform of one channel on `path` (see [`input`]).
///
/// # Safety
/// `rows` holds `24 * (tp + 1)` floats, `v` `36 * ic * tp`; the path's ISA is supported.
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

/// Output transform of one channel on `path` (see [`output`]).
///
/// # Safety
/// `m` holds `36 * ocp * tp` floats, `y` `16 * tp`; the path's ISA is supported.
pub unsafe fn output_transform(path: Path, m: *const f32, o: usize, ocp: usize, tp: usize, y: *mut f32) {
    match path {
        #[cfg(target_arch = "x86_64")]
        Path::Avx512 => output_avx512(m, o, ocp, tp, y),
        #[cfg(target_arch = "x86_64")]
        Path::Avx2 => output_avx2(m, o, ocp, tp, y),
        Path::Portable16 => output::<Lanes<16>>(m, o, ocp, tp, y),
        _ => output::<Lanes<4>>(m, o, ocp, tp, y),
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
unsafe fn output_avx2(m: *const f32, o: usize, ocp: usize, tp: usize, y: *mut f32) {
    output::<super::simd::Avx2>(m, o, ocp, tp, y)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn output_avx512(m: *const f32, o: usize, ocp: usize, tp: usize, y: *mut f32) {
    output::<super::simd::Avx512>(m, o, ocp, tp, y)
}
