//! The Winograd GEMMs: for each of the 36 transform positions, `M[pos] = U[pos] * V[pos]` with
//! `U` (out channels x in channels) packed once at prepare time and `V` (in channels x tiles) read
//! in place, straight from the input transform's output.
//!
//! Why hand-written rather than the `gemm` crate (which the im2col path uses): these products are
//! small (32-64 rows, 64-192 deep, 16-64 tiles wide) and there are 36 of them per block of tiles,
//! so a general GEMM's per-call work (re-packing U and V, dispatch, blocking decisions) is a large
//! share of each call. Here U is packed once, in the micro-kernel's order, and V needs no packing
//! because the input transform already writes it as rows of `tp` contiguous tiles. Measured on
//! Zen 3 (AVX2, one thread, `examples/wgemm_probe.rs`, load average 2.3): 62-97 GFLOP/s against
//! the crate's 62-84 on the same 36 products, 1.02-1.32x on 17 of 18 x4v3/x4plus shapes (0.85x on
//! 192 -> 32 channels at 64 tiles).
//!
//! Micro-kernel: an `MR x (NV * LANES)` block of M in registers (MR out channels broadcast from U,
//! NV vectors of tiles loaded from V), one FMA per (row, vector) per step of the inner dimension.
//! - AVX2: MR 6, NV 2 (6 x 16, 12 accumulators of 16 registers; 4 x 24 measured slower), and
//!   4 x 16 for row counts that 6 does not divide but 4 does, up to 32 (no padded rows);
//! - AVX-512F: MR 8, NV 3 (8 x 48, 24 accumulators of 32 registers; a remainder of 4 vectors runs
//!   as 2 + 2). Against NV 2 on the 2-core Xeon (one thread, u2netp's 16..128 -> 16/64 shapes):
//!   1.08-1.10x at 40 tiles (48 padded: 3 vectors, where NV 2 left a 1-vector tail), equal at 16,
//!   20 and 64;
//! - portable: MR 4, NV 3 over 4-lane arrays.
//!
//! Rows are padded to a multiple of MR (zero rows in the packed U; their results are ignored) and
//! the tile count to a multiple of LANES by the caller ([`Layout::tiles_padded`]); a tail of fewer
//! than NV vectors runs a narrower instance of the same kernel.

use super::isa::Isa;
use super::simd::{Lanes, Simd};

/// Which compiled copy of the Winograd kernels (GEMM and transforms) runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    Scalar,
    Avx2,
    Avx512,
    /// The AVX-512 panel shapes and vector width over portable 16-lane arrays: the AVX-512 path's
    /// index logic, runnable on any CPU (tests on machines without AVX-512).
    Portable16,
}

impl Path {
    pub fn of(isa: Isa) -> Path {
        match isa {
            Isa::Scalar => Path::Scalar,
            Isa::Avx2 => Path::Avx2,
            Isa::Avx512 => Path::Avx512,
        }
    }
    /// The ISA level a CPU needs for this path.
    pub fn isa(self) -> Isa {
        match self {
            Path::Avx2 => Isa::Avx2,
            Path::Avx512 => Isa::Avx512,
            Path::Scalar | Path::Portable16 => Isa::Scalar,
        }
    }
}

/// Panel geometry of one path's micro-kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub mr: usize,
    pub lanes: usize,
    pub nv: usize,
}

impl Layout {
    /// The path's main panel shape.
    pub fn of(path: Path) -> Layout {
        match path {
            Path::Avx512 | Path::Portable16 => Layout { mr: 8, lanes: 16, nv: 3 },
            Path::Avx2 => Layout { mr: 6, lanes: 8, nv: 2 },
            Path::Scalar => Layout { mr: 4, lanes: 4, nv: 3 },
        }
    }
    /// The panel shape for a product with `rows` rows: on AVX2, 4 x 16 where 6 x 16 would pad
    /// (e.g. RRDB's 32-channel convs: 36 rows computed for 32).
    pub fn for_rows(path: Path, rows: usize) -> Layout {
        let l = Layout::of(path);
        if path == Path::Avx2 && !rows.is_multiple_of(6) && rows.is_multiple_of(4) && rows <= 32 {
            Layout { mr: 4, ..l }
        } else {
            l
        }
    }
    pub fn rows_padded(&self, rows: usize) -> usize {
        rows.div_ceil(self.mr) * self.mr
    }
    pub fn tiles_padded(&self, tiles: usize) -> usize {
        tiles.div_ceil(self.lanes) * self.lanes
    }
}

/// Pack `u` (`npos` matrices of `rows x k`, row-major, contiguous) into the micro-kernel order:
/// per matrix, blocks of MR rows, each block `k` steps of MR values (rows past `rows` are zero).
pub fn pack_a(u: &[f32], npos: usize, rows: usize, k: usize, l: Layout) -> Vec<f32> {
    debug_assert!(l.rows_padded(rows).is_multiple_of(l.mr));
    let rp = l.rows_padded(rows);
    let mut out = vec![0.0f32; npos * rp * k];
    for pos in 0..npos {
        let src = &u[pos * rows * k..(pos + 1) * rows * k];
        let dst = &mut out[pos * rp * k..(pos + 1) * rp * k];
        for r in 0..rows {
            let (blk, i) = (r / l.mr, r % l.mr);
            for kk in 0..k {
                dst[(blk * k + kk) * l.mr + i] = src[r * k + kk];
            }
        }
    }
    out
}

/// One segment of the inner dimension of B: `k` rows of `tp` floats (row stride `ldb`), at
/// `ptr + pos * pos_stride` for position `pos`. The segments of a batch are consecutive slices of the
/// inner dimension (e.g. the parts of a channel concat, each transformed on its own).
#[derive(Clone, Copy)]
pub struct Seg {
    pub ptr: *const f32,
    pub k: usize,
    pub pos_stride: usize,
}

/// One batch of products: for pos in 0..npos,
/// `C[pos] (rows_padded x tp, row stride ldc) = A[pos] (packed by [`pack_a`]) * B[pos]`, where B's
/// `k` rows are the segments `b` in order.
#[derive(Clone, Copy)]
pub struct Batch<'a> {
    pub npos: usize,
    /// Rows, already padded to a multiple of the layout's MR.
    pub rows: usize,
    /// The inner dimension: the sum of the segments' `k`.
    pub k: usize,
    /// Columns (tiles), a multiple of the layout's LANES.
    pub tp: usize,
    pub a: *const f32,
    pub a_stride: usize,
    pub b: &'a [Seg],
    pub ldb: usize,
    pub c: *mut f32,
    pub c_stride: usize,
    pub ldc: usize,
}

/// Run the batch with the kernel of `path` (whose ISA this CPU must support, and whose [`Layout`]
/// padded `rows`, `tp` and packed `a`).
///
/// # Safety
/// The pointers must cover the extents above; `path.isa().supported()`.
pub unsafe fn run(path: Path, p: &Batch) {
    debug_assert!(path.isa().supported());
    debug_assert!(p.rows.is_multiple_of(Layout::for_rows(path, p.rows).mr));
    match path {
        #[cfg(target_arch = "x86_64")]
        Path::Avx512 => run_avx512(p),
        #[cfg(target_arch = "x86_64")]
        Path::Avx2 if Layout::for_rows(path, p.rows).mr == 4 => run_avx2_mr4(p),
        #[cfg(target_arch = "x86_64")]
        Path::Avx2 => run_avx2(p),
        Path::Portable16 => batch::<Lanes<16>, 8, 3>(p),
        _ => batch::<Lanes<4>, 4, 3>(p),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_avx2_mr4(p: &Batch) {
    batch::<super::simd::Avx2, 4, 2>(p)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_avx2(p: &Batch) {
    batch::<super::simd::Avx2, 6, 2>(p)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn run_avx512(p: &Batch) {
    batch::<super::simd::Avx512, 8, 3>(p)
}

#[inline(always)]
unsafe fn batch<S: Simd, const MR: usize, const NV: usize>(p: &Batch) {
    let w = NV * S::LANES;
    debug_assert!(p.rows.is_multiple_of(MR) && p.tp.is_multiple_of(S::LANES));
    debug_assert_eq!(p.b.iter().map(|s| s.k).sum::<usize>(), p.k);
    for pos in 0..p.npos {
        let a = p.a.add(pos * p.a_stride);
        let c = p.c.add(pos * p.c_stride);
        let mut n0 = 0;
        while n0 < p.tp {
            let left = (p.tp - n0) / S::LANES;
            // NV vectors at a time, but a remainder of NV + 1 as two pairs rather than NV and a single one.
            let step = if left >= NV && (NV <= 2 || left != NV + 1) {
                panel::<S, MR, NV>(p, a, pos, c, n0);
                w
            } else if left >= 2 {
                panel::<S, MR, 2>(p, a, pos, c, n0);
                2 * S::LANES
            } else {
                panel::<S, MR, 1>(p, a, pos, c, n0);
                S::LANES
            };
            n0 += step;
        }
    }
}

/// All row blocks against one column panel starting at `n0` (the B panel stays in L1 meanwhile).
#[inline(always)]
unsafe fn panel<S: Simd, const MR: usize, const NV: usize>(p: &Batch, a: *const f32, pos: usize, c: *mut f32, n0: usize) {
    for mb in (0..p.rows).step_by(MR) {
        tile::<S, MR, NV>(p.b, pos, n0, a.add(mb * p.k), p.ldb, c.add(mb * p.ldc + n0), p.ldc);
    }
}

#[inline(always)]
unsafe fn tile<S: Simd, const MR: usize, const NV: usize>(segs: &[Seg], pos: usize, n0: usize, a: *const f32, ldb: usize, c: *mut f32, ldc: usize) {
    let mut acc = [[S::zero(); NV]; MR];
    let mut ap = a;
    for seg in segs {
        let mut bp = seg.ptr.add(pos * seg.pos_stride + n0);
        for _ in 0..seg.k {
            let mut bv = [S::zero(); NV];
            for (j, v) in bv.iter_mut().enumerate() {
                *v = S::load(bp.add(j * S::LANES));
            }
            for (i, row) in acc.iter_mut().enumerate() {
                let av = S::splat(ap.add(i));
                for (j, v) in row.iter_mut().enumerate() {
                    *v = S::fma(*v, av, bv[j]);
                }
            }
            ap = ap.add(MR);
            bp = bp.add(ldb);
        }
    }
    for (i, row) in acc.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            S::store(c.add(i * ldc + j * S::LANES), *v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    }

    /// Every layout (and the portable AVX-512 shape) against a plain triple loop, on odd sizes.
    #[test]
    fn matches_naive_product() {
        let mut seed = 3u64;
        let mut ran = Vec::new();
        for path in [Path::Scalar, Path::Avx2, Path::Avx512, Path::Portable16] {
            if let Some(why) = path.isa().unsupported_reason() {
                eprintln!("wgemm {path:?}: SKIPPED: {why}");
                continue;
            }
            for &(npos, rows, k, t) in &[(2, 5, 7, 3), (3, 32, 64, 21), (1, 13, 33, 50), (2, 64, 19, 64), (1, 1, 1, 1), (1, 8, 9, 17)] {
                let l = Layout::for_rows(path, rows);
                let (rp, tp) = (l.rows_padded(rows), l.tiles_padded(t));
                let u: Vec<f32> = (0..npos * rows * k).map(|_| lcg(&mut seed)).collect();
                let v: Vec<f32> = (0..npos * k * tp).map(|_| lcg(&mut seed)).collect();
                let a = pack_a(&u, npos, rows, k, l);
                let mut c = vec![f32::NAN; npos * rp * tp];
                // B as up to three segments of the inner dimension, each its own [pos][k_s][tp] array.
                let cuts = [0, k / 3, k / 2, k];
                let parts: Vec<Vec<f32>> = cuts
                    .windows(2)
                    .map(|w| (0..npos).flat_map(|pos| v[(pos * k + w[0]) * tp..(pos * k + w[1]) * tp].iter().copied()).collect())
                    .collect();
                let segs: Vec<Seg> = cuts.windows(2).zip(&parts).filter(|(w, _)| w[1] > w[0]).map(|(w, p)| Seg { ptr: p.as_ptr(), k: w[1] - w[0], pos_stride: (w[1] - w[0]) * tp }).collect();
                let batch = Batch {
                    npos,
                    rows: rp,
                    k,
                    tp,
                    a: a.as_ptr(),
                    a_stride: rp * k,
                    b: &segs,
                    ldb: tp,
                    c: c.as_mut_ptr(),
                    c_stride: rp * tp,
                    ldc: tp,
                };
                unsafe { run(path, &batch) };
                for pos in 0..npos {
                    for r in 0..rows {
                        for j in 0..tp {
                            let want: f32 = (0..k).map(|kk| u[(pos * rows + r) * k + kk] * v[(pos * k + kk) * tp + j]).sum();
                            let got = c[(pos * rp + r) * tp + j];
                            assert!((got - want).abs() <= 1e-5 * (k as f32).sqrt().max(1.0), "{path:?} {rows}x{k}x{t}: {got} vs {want}");
                        }
                    }
                }
            }
            ran.push(format!("{path:?}"));
        }
        eprintln!("wgemm ran: {ran:?}");
    }
}
