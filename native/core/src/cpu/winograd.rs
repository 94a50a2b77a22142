//! Winograd F(4x4, 3x3) convolution for 3x3, stride-1, dilation-1, ungrouped convs (the bulk of
//! every SR network here): 36 multiplies per 4x4 output tile and channel pair instead of 144.
//! This file: packing, the block loop, the gather of input rows, and kept input transforms; the
//! transforms themselves are in [`super::wtransform`], the products in [`super::wgemm`].
//!
//! Per block of up to [`CHUNK`] tiles, numbered row by row over the map's tile grid (so on a narrow
//! map a block spans several tile rows and its tile vectors are full; [`InputKey`] fixes the cut):
//! 1. input transform V = B^T d B of each 6x6 input patch, laid out `V[pos][ic][tile]` (the patches
//!    are gathered by (row, column) so a vector of tiles is contiguous; the next channel's rows are
//!    prefetched);
//! 2. 36 GEMMs `M[pos] (oc x tiles) = U[pos] (oc x ic) * V[pos] (ic x tiles)`, where U = G g G^T
//!    are the transformed weights, packed once at prepare time in the micro-kernel's order;
//! 3. inverse transform Y = A^T M A of each tile, written to the output, then the fused epilogue.
//!
//! The input channels come as [`Source`]s: planes transformed block by block, or a
//! [`TransformedInput`] a dense block kept from an earlier conv that read the same tensor (made
//! by [`transform_input`] for the whole map); the GEMM's inner dimension walks the sources in order.
//!
//! The tile count of a block is padded to the ISA's vector width (`tp`; the pad tiles read the pad
//! value and their results are dropped), so every loop runs on whole vectors. Everything here is
//! compiled once per ISA level (plain, AVX2+FMA, AVX-512F) and the backend's level picks one.
//! Matrices (Lavin & Gray, points 0, +-1, +-2, inf). In f32 the error relative to direct
//! convolution is ~1e-6 of the output scale for these networks (see the tests below and
//! tests/cpu_isa.rs).

use super::epilogue::RowOps;
use super::isa::Isa;
use super::wgemm::{self, Layout, Path};
use super::wtransform::{gather_tiles, input_transform, output_transform, prefetch_tiles, segments, Geo, Post};
#[cfg(target_arch = "x86_64")]
use super::wtransform::{input_direct_avx512, input_vec_avx512};
use super::ptr::SendPtr;
use crate::ncnn::model::{Activation, Conv};
use crate::reference::ConvGeometry;
use crate::tensor::Tensor;
use rayon::prelude::*;
use std::cell::RefCell;

const POS: usize = 36;
/// Tiles per block (V and M are 36 x 64 x CHUNK floats each for 64 channels). 64 measured ~12%
/// faster than 32 (fewer, larger GEMM calls) on Zen 3.
const CHUNK: usize = 64;

/// Bytes of packed weights above which they are [`Packed::big`].
const BIG_U: usize = 4 << 20;

/// Transformed weights, packed by [`wgemm::pack_a`] for `isa`: per position, `ocp x ic`.
pub struct Packed {
    u: Vec<f32>,
    ic: usize,
    oc: usize,
    /// `oc` rounded up to the micro-kernel's row block.
    ocp: usize,
    path: Path,
    /// Winograd on every map, however narrow (the pinned [`super::options::ConvPolicy::Winograd`]).
    pinned: bool,
}

impl Packed {
    /// Runs as Winograd on every map, also those [`fills`] would leave to im2col.
    pub fn pinned(self) -> Packed {
        Packed { pinned: true, ..self }
    }
    /// Whether the packed weights are well past a core's L2 (over 4 MB: 128 -> 256 channels and up).
    fn big(&self) -> bool {
        self.u.len() * 4 > BIG_U
    }
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

/// Whether an `out_w` x `out_h` map is worth running as Winograd with `p`: at least half of the
/// outputs its tile vectors compute are inside the map (blocks run along the tile grid row by row,
/// so only the map's last vector of tiles is padded, but a tile past the map's edge is computed in
/// full). The per-layer choice ([`super::calibrate`]) is measured on a 64x64 map; narrower maps
/// where Winograd computes mostly padding fall back to im2col (unless [`Packed::pinned`]). On the
/// 2-core AVX-512 Xeon (one thread, CPU time, fastest of 3): U²-Net's 512 -> 512 at 20x20 (25 tiles
/// in 32, 78% inside) 9.5 ms Winograd vs 14.6 ms im2col, 1024 -> 512 18 vs 31, at 10x10 (9 tiles in
/// 16, 39% inside) 7.0 vs 4.9.
pub fn fills(p: &Packed, out_w: usize, out_h: usize) -> bool {
    let tiles = out_w.div_ceil(4) * out_h.div_ceil(4);
    p.pinned || 2 * out_w * out_h >= 16 * Layout::of(p.path).tiles_padded(tiles)
}

pub fn pack(c: &Conv, isa: Isa) -> Packed {
    pack_for(c, Path::of(isa))
}

/// [`pack`] for a given kernel path (tests use [`Path::Portable16`]).
pub fn pack_for(c: &Conv, path: Path) -> Packed {
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
    let l = Layout::for_rows(path, oc);
    Packed { u: wgemm::pack_a(&u, POS, oc, ic, l), ic, oc, ocp: l.rows_padded(oc), path, pinned: false }
}

thread_local! {
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Process-wide tiles per block (0: [`CHUNK`]), from [`super::CpuOptions::wino_chunk`] (the
/// server's `LUCENT_CPU_WINO_CHUNK`, for measurements) through [`set_chunk`].
static CHUNK_SET: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets the tiles per block for the process (a backend's option; 0 = the default).
pub fn set_chunk(n: usize) {
    CHUNK_SET.store(n, std::sync::atomic::Ordering::Relaxed);
}

/// Tiles per block (of the `tiles` of a map, numbered row by row): [`CHUNK`] (or the one [`set_chunk`]
/// set), cut down so that there are at least 4 blocks per thread when the map is small, never below
/// one vector of tiles; a whole number of vectors, so only the map's last block carries pad tiles.
/// Not cut when the packed weights are `big` (every block streams all of them from memory): then
/// [`forward`] splits a block's output channels between threads instead.
fn chunk_tiles(tiles: usize, lanes: usize, big: bool) -> usize {
    let base = match CHUNK_SET.load(std::sync::atomic::Ordering::Relaxed) {
        0 => CHUNK,
        n => n,
    };
    let threads = rayon::current_num_threads().max(1);
    let mut chunk = base.min(tiles);
    let min_blocks = if big { 1 } else { 4 * threads };
    while chunk > lanes && tiles.div_ceil(chunk) < min_blocks {
        chunk = (chunk / 2).max(lanes);
    }
    chunk.div_ceil(lanes) * lanes
}

/// Everything that fixes how a map is cut into blocks and transformed: a transformed input can be
/// reused by a conv with the same key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputKey {
    w: usize,
    h: usize,
    oh: usize,
    ow: usize,
    pl: usize,
    pt: usize,
    pv_bits: u32,
    chunk: usize,
    path: Path,
}

impl InputKey {
    pub fn new(c: &Conv, p: &Packed, w: usize, h: usize, g: ConvGeometry) -> InputKey {
        let (oh, ow) = (g.out_h, g.out_w);
        let chunk = chunk_tiles(ow.div_ceil(4) * oh.div_ceil(4), Layout::of(p.path).lanes, p.big());
        InputKey { w, h, oh, ow, pl: g.pad_left, pt: g.pad_top, pv_bits: c.pad_value.to_bits(), chunk, path: p.path }
    }
    /// Tiles per tile row.
    fn tw(&self) -> usize {
        self.ow.div_ceil(4)
    }
    fn tiles(&self) -> usize {
        self.oh.div_ceil(4) * self.tw()
    }
    fn blocks(&self) -> usize {
        self.tiles().div_ceil(self.chunk)
    }
    /// (first tile, tiles, padded tiles) of block `bi` (tiles numbered row by row).
    fn block(&self, bi: usize) -> (usize, usize, usize) {
        let t0 = bi * self.chunk;
        let t = (t0 + self.chunk).min(self.tiles()) - t0;
        (t0, t, Layout::of(self.path).tiles_padded(t))
    }
    fn geo(&self) -> Geo {
        Geo { w: self.w, h: self.h, pl: self.pl, pt: self.pt, pv: f32::from_bits(self.pv_bits) }
    }
}

/// The input transform `V[pos][c][tile]` of some channels for every block of a map, kept while
/// later convs read the same channels (RRDB dense blocks: each conv reads all earlier outputs of its
/// block, so most of its input was transformed before).
pub struct TransformedInput {
    key: InputKey,
    channels: usize,
    data: Vec<f32>,
    /// Start of each block's `[pos][c][tp]` array in `data`.
    offsets: Vec<usize>,
}

impl TransformedInput {
    pub fn key(&self) -> InputKey {
        self.key
    }
    /// The buffer, for reuse by a later [`transform_input`].
    pub fn into_buffer(self) -> Vec<f32> {
        self.data
    }
}

/// Transform `planes` for every block of `key` (in parallel over blocks), into `buf` (a buffer of
/// an earlier transform, so big maps do not pay for fresh zeroed pages every time).
pub fn transform_input(key: InputKey, planes: &[&[f32]], buf: Vec<f32>) -> TransformedInput {
    let ch = planes.len();
    let mut offsets = Vec::with_capacity(key.blocks() + 1);
    let mut total = 0;
    for bi in 0..key.blocks() {
        offsets.push(total);
        total += POS * ch * key.block(bi).2;
    }
    let mut data = buf;
    // Every element is written below; resize only zero-fills growth.
    data.resize(total, 0.0);
    let dst = SendPtr(data.as_mut_ptr());
    let geo = key.geo();
    let tw = key.tw();
    (0..key.blocks()).into_par_iter().for_each(|bi| {
        #[allow(clippy::redundant_locals)] // moves the whole Send wrapper into the closure (not its field)
        let dst = dst;
        let (t0, t, tp) = key.block(bi);
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            let rows_len = 36 * (tp + 1);
            if s.len() < rows_len {
                s.resize(rows_len, 0.0);
            }
            // SAFETY: blocks own disjoint [offsets[bi], +36 ch tp) ranges of data.
            let v = unsafe { dst.0.add(offsets[bi]) };
            transform_block(key.path, planes, &geo, tw, t0, t, tp, &mut s[..rows_len], v);
        });
    });
    TransformedInput { key, channels: ch, data, offsets }
}

/// Gather and transform `planes` for one block (tiles [t0, t0 + t) of a map `tw` tiles wide) into `v`
/// (`[pos][planes.len()][tp]`).
#[allow(clippy::too_many_arguments)]
fn transform_block(path: Path, planes: &[&[f32]], geo: &Geo, tw: usize, t0: usize, t: usize, tp: usize, rows: &mut [f32], v: *mut f32) {
    let ch = planes.len();
    #[cfg(target_arch = "x86_64")]
    if path == Path::Avx512 {
        // Vectors of 16 tiles within one tile row straight from the plane; the others (across a
        // tile row's end, or the block's last, partly pad) through the gather.
        for (i, plane) in planes.iter().enumerate() {
            if let Some(next) = planes.get(i + 1) {
                prefetch_tiles(next, geo, tw, t0, t);
            }
            for k in (0..tp).step_by(16) {
                let (tr, tc) = ((t0 + k) / tw, (t0 + k) % tw);
                // SAFETY: the path's ISA is supported; v holds 36 ch tp floats and k + 16 <= tp; the
                // direct vector's tiles are inside tile row tr; rows holds 36 (tp + 1) >= 36 * 17 floats.
                unsafe {
                    if k + 16 <= t && tc + 16 <= tw {
                        input_direct_avx512(plane, geo, tr, tc, v, i, ch, tp, k);
                    } else {
                        gather_tiles(Isa::Avx512, plane, geo, tw, t0 + k, t.saturating_sub(k).min(16), 16, rows);
                        input_vec_avx512(rows.as_ptr(), 17, v, i, ch, tp, k);
                    }
                }
            }
        }
        return;
    }
    for (i, plane) in planes.iter().enumerate() {
        if let Some(next) = planes.get(i + 1) {
            prefetch_tiles(next, geo, tw, t0, t);
        }
        gather_tiles(path.isa(), plane, geo, tw, t0, t, tp, rows);
        // SAFETY: rows holds 36 (tp + 1) floats, v 36 ch tp; the path's ISA is supported.
        unsafe { input_transform(path, rows.as_ptr(), v, i, ch, tp) };
    }
}

/// Where a run of input channels comes from: planes to transform now, or a kept transform.
pub enum Source<'a> {
    Planes(Vec<&'a [f32]>),
    Transformed(&'a TransformedInput),
}

/// Run the conv: `sources` are the input channels in order (h x w each, or transformed already with
/// this conv's [`InputKey`]), `out` is num_output x out_h x out_w.
#[allow(clippy::too_many_arguments)]
pub fn forward(c: &Conv, p: &Packed, sources: &[Source], w: usize, h: usize, g: ConvGeometry, out: &mut Tensor, ops: &RowOps) {
    let (ic, oc, ocp) = (p.ic, p.oc, p.ocp);
    let (oh, ow) = (g.out_h, g.out_w);
    let key = InputKey::new(c, p, w, h, g);
    let geo = key.geo();
    let tw = key.tw();
    let path = p.path;
    let fresh: usize = sources.iter().map(|s| if let Source::Planes(ps) = s { ps.len() } else { 0 }).sum();
    let total: usize = sources.iter().map(|s| if let Source::Transformed(t) = s { t.channels } else { 0 }).sum::<usize>() + fresh;
    assert_eq!(total, ic, "winograd sources cover the input channels");
    for s in sources {
        if let Source::Transformed(t) = s {
            assert_eq!(t.key, key, "a kept input transform is reused with its own geometry only");
        }
    }
    // Fewer blocks than threads with big weights: each block's output channels in `parts` runs of
    // whole row panels, one job each (the input transform is repeated, the weights read once).
    let mr = Layout::for_rows(path, oc).mr;
    let nb = key.blocks();
    let threads = rayon::current_num_threads().max(1);
    let want = if p.big() && nb < threads { threads.div_ceil(nb).min(ocp / mr) } else { 1 };
    let mut part_rows = (ocp / mr).div_ceil(want.max(1)) * mr;
    if Layout::for_rows(path, part_rows).mr != mr {
        part_rows = ocp;
    }
    let parts = ocp.div_ceil(part_rows);
    // Bias and ReLU (all of U²-Net's and most nets' epilogues) inside the output transform.
    let fused = ops.slope.is_none() && ops.residual.is_empty() && matches!(ops.act, Activation::None | Activation::Relu);
    let dst = SendPtr(out.data.as_mut_ptr());
    (0..nb * parts).into_par_iter().for_each(|job| {
        #[allow(clippy::redundant_locals)] // moves the whole Send wrapper into the closure (not its field)
        let dst = dst;
        let (bi, r0) = (job / parts, (job % parts) * part_rows);
        let rows_p = part_rows.min(ocp - r0);
        let (t0, t, tp) = key.block(bi);
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            let rows_len = 36 * (tp + 1);
            let need = rows_len + 16 * tp + POS * fresh * tp + POS * rows_p * tp;
            if s.len() < need {
                s.resize(need, 0.0);
            }
            let (rows, rest) = s.split_at_mut(rows_len);
            let (ybuf, rest) = rest.split_at_mut(16 * tp);
            let (v, rest) = rest.split_at_mut(POS * fresh * tp);
            let m = &mut rest[..POS * rows_p * tp];
            let mut segs = Vec::with_capacity(sources.len());
            let mut off = 0;
            for src in sources {
                match src {
                    Source::Planes(ps) => {
                        let vp = v[off..].as_mut_ptr();
                        transform_block(path, ps, &geo, tw, t0, t, tp, rows, vp);
                        segs.push(wgemm::Seg { ptr: vp as *const f32, k: ps.len(), pos_stride: ps.len() * tp });
                        off += POS * ps.len() * tp;
                    }
                    Source::Transformed(tv) => {
                        let ptr = tv.data[tv.offsets[bi]..].as_ptr();
                        segs.push(wgemm::Seg { ptr, k: tv.channels, pos_stride: tv.channels * tp });
                    }
                }
            }
            let batch = wgemm::Batch {
                npos: POS,
                rows: rows_p,
                k: ic,
                tp,
                // Rows r0.. of each position's packed panel (whole MR-row blocks of ic steps).
                a: p.u[r0 * ic..].as_ptr(),
                a_stride: ocp * ic,
                b: &segs,
                ldb: tp,
                c: m.as_mut_ptr(),
                c_stride: rows_p * tp,
                ldc: tp,
            };
            // SAFETY: u holds POS packed ocp x ic panels (rows r0..r0 + rows_p of each read), each
            // segment POS k x tp, m POS rows_p x tp; the backend only pins an ISA the CPU supports,
            // and `pack` used the same one.
            unsafe { wgemm::run(path, &batch) };
            for o in r0..oc.min(r0 + rows_p) {
                // SAFETY: m holds 36 rows_p tp floats, ybuf 16 tp.
                let post = if fused { Post { bias: ops.bias.map_or(0.0, |b| b[o]), relu: ops.act == Activation::Relu } } else { Post::default() };
                unsafe { output_transform(path, m.as_ptr(), o - r0, rows_p, tp, ybuf.as_mut_ptr(), post) };
                for (k, tr, tc, ts) in segments(tw, t0, t) {
                    let (oy0, ox0) = (tr * 4, tc * 4);
                    let cols = (ow - ox0).min(4 * ts);
                    for r in 0..(oh - oy0).min(4) {
                        let off = (oy0 + r) * ow + ox0;
                        // SAFETY: blocks write disjoint (rows, cols) ranges of each output plane.
                        let seg = unsafe { std::slice::from_raw_parts_mut(dst.0.add(o * oh * ow + off), cols) };
                        let y0 = r * 4 * tp + 4 * k;
                        seg.copy_from_slice(&ybuf[y0..y0 + cols]);
                        if !fused {
                            ops.apply(o, off, seg);
                        }
                    }
                }
            }
        });
    });
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
    /// wider than one chunk, with and without padding; blocks that span tile rows (narrow maps, and
    /// 150 wide: 38 tiles a row, blocks of 16); weights big enough that a block's outputs are split
    /// between jobs (160 -> 200 on 20x20 and 9x7: one block of tiles; run in a 3-thread pool so
    /// the split is uneven); on AVX-512, 16-tile vectors read straight from the plane with the pad
    /// value around (70 x 11 pad 2, 129 x 6); activations none, ReLU (fused into the output transform)
    /// and leaky ReLU (the epilogue) in turn. Relative error (to the output's peak) < 1e-5.
    #[test]
    fn matches_reference() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        pool.install(matches_reference_cases);
    }

    fn matches_reference_cases() {
        let mut seed = 7u64;
        for (n, &(ic, oc, w, h, pad, pv)) in [
            (8, 8, 4, 4, 1, 0.0),
            (16, 24, 13, 7, 1, 0.0),
            (64, 64, 150, 9, 1, 0.0),
            (12, 9, 11, 10, 0, 0.0),
            (9, 16, 6, 5, 2, 0.5),
            (64, 48, 37, 21, 1, 0.0),
            (32, 16, 20, 20, 1, 0.0),
            (16, 8, 10, 10, 1, 0.5),
            (160, 200, 20, 20, 1, 0.0),
            (160, 200, 9, 7, 1, 0.25),
            (16, 16, 70, 11, 2, 0.25),
            (8, 8, 129, 6, 1, 0.0),
        ]
        .iter()
        .enumerate()
        {
            // Bias only, bias + ReLU (both inside the output transform), leaky ReLU (the epilogue).
            let act = [Activation::None, Activation::Relu, Activation::LeakyRelu(0.1)][n % 3];
            let c = Conv { activation: act, ..conv(ic, oc, pad, pv, &mut seed) };
            let x = Tensor::from_vec(ic, h, w, (0..ic * h * w).map(|_| lcg(&mut seed)).collect());
            let want = reference::conv(&c, &x).unwrap();
            let g = reference::conv_geometry(&c, w, h).unwrap();
            for path in [Path::Scalar, Path::Avx2, Path::Avx512, Path::Portable16] {
                if let Some(why) = path.isa().unsupported_reason() {
                    eprintln!("winograd {path:?}: SKIPPED: {why}");
                    continue;
                }
                let isa = path.isa();
                let p = pack_for(&c, path);
                let planes: Vec<&[f32]> = (0..ic).map(|i| x.channel(i)).collect();
                let mut got = Tensor::zeros(oc, g.out_h, g.out_w);
                let ops = RowOps { isa, bias: c.bias.as_deref(), act, slope: None, residual: &[], plane: g.out_h * g.out_w };
                // Half the channels transformed ahead (as a kept transform), half on the fly.
                let key = InputKey::new(&c, &p, w, h, g);
                let kept = transform_input(key, &planes[..ic / 2], Vec::new());
                let sources = [Source::Transformed(&kept), Source::Planes(planes[ic / 2..].to_vec())];
                forward(&c, &p, &sources, w, h, g, &mut got, &ops);
                assert_eq!((got.c, got.h, got.w), (want.c, want.h, want.w));
                let scale = want.data.iter().fold(1.0f32, |m, v| m.max(v.abs()));
                let err = got.data.iter().zip(&want.data).fold(0.0f32, |m, (a, b)| m.max((a - b).abs())) / scale;
                assert!(err < 1e-5, "{path:?}: ic {ic} oc {oc} {w}x{h} pad {pad}: rel err {err:e}");
            }
        }
    }
}
