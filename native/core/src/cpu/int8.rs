//! int8 direct convolution (the same convs as [`super::bf16`]: stride 1, no dilation, one group,
//! kernels up to 5x5, at least 8 input channels): s8 weights, u8 activations, i32 sums, then the
//! conv's fused fp32 epilogue.
//!
//! Long (~570 lines) on purpose: the quantisation, the conversion and the VNNI / emulated kernels
//! share one layout and one set of invariants; split, each part would need the others to be read.
//!
//! Quantisation: weights symmetric per output channel (`sw[o] = max|w| / 127`, values rounded to
//! -127..127), packed once with their sums `wsum[o]`; activations per tensor, asymmetric, from the
//! conv input's actual range measured over all of it first (`sa = (hi - lo) / 255`, the range
//! covering the pad value; zero point `zp = round(-lo / sa)`, `q = clamp(round(x / sa) + zp, 0, 255)`).
//! The buffer stores `v = q - 128` as s8, and every kernel computes the same integer
//! `acc[o] = sum w_q * v` (exact, i32); the output is `sa * sw[o] * (acc - (zp - 128) * wsum[o])`,
//! written into the conv's fp32 epilogue ([`RowOps`]).
//!
//! Layout: per work item, its input rows converted into zero-padded channel quads, `[rows][ic/4][Ws]` of u32 (byte
//! `i` of a quad: channel `4k + i`; `ic` rounded up to 64, channels past `ic` 0). That is
//! [`super::bf16`]'s pair layout with four bytes where it has two bf16 values, so the kernels read
//! it through the same [`Job`] (its "pairs" are quads here, `nkc` counts 64-channel chunks): each
//! tap is a shifted GEMM, the B tile of outputs `(y, x .. x + 16)` starting at padded row `y + dy`,
//! column `x + dx`; weights are `[tap][oc/16][ic/64]` blocks of 16 outputs x 16 quads (1 KB).
//!
//! Kernels ([`Int8Kernel`]), one block = 32 output channels x 32 outputs of a row, as i32 into the
//! output planes (converted in place to fp32 before the epilogue): AMX (`TDPBSSD`, s8 x s8: the
//! activations sit in the B tile, whose TDPBUSD operand is the signed one, so the stored s8 `v` is
//! used as is), AVX512-VNNI `vpdpbusd` (u8 x s8: each B row is flipped back to `q = v ^ 0x80` and
//! the accumulators start at `-128 * wsum[o]`, giving the same `acc`), and a portable one with the
//! identical integer arithmetic, so its results are bit-identical to the hardware kernels' (tests
//! of the layout on any CPU).

pub use super::bf16_job::Job;
use super::bf16_job::{phases, probe_ns, row_stride, run_rows, KernelFn, Lines, ProbeShape, Split};
use super::epilogue::RowOps;
use super::isa::Isa;
use super::ptr::SendPtr;
use crate::error::{Code, Result};
use crate::ncnn::model::Conv;
use crate::reference::{self, ConvGeometry};
use crate::tensor::Tensor;
use rayon::prelude::*;
use std::fmt;
use std::cell::RefCell;

/// Which int8 kernel runs (lowest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Int8Kernel {
    /// Portable Rust, the same integer arithmetic (slow: tests, and only when pinned).
    Emulated,
    /// AVX512-VNNI `vpdpbusd` (Intel Cascade Lake and later, AMD Zen 4/5).
    Vnni,
    /// AMX-INT8 tiles (Intel Sapphire Rapids and later; the OS's permission, asked once).
    Amx,
}

impl Int8Kernel {
    pub const ALL: [Int8Kernel; 3] = [Int8Kernel::Emulated, Int8Kernel::Vnni, Int8Kernel::Amx];

    pub fn name(self) -> &'static str {
        match self {
            Int8Kernel::Emulated => "int8-emulated",
            Int8Kernel::Vnni => "avx512vnni",
            Int8Kernel::Amx => "amx-int8",
        }
    }

    /// Why the kernel cannot run here, or None when it can.
    pub fn unsupported_reason(self) -> Option<String> {
        match self {
            Int8Kernel::Emulated => None,
            #[cfg(target_arch = "x86_64")]
            Int8Kernel::Vnni => {
                (!(std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512vnni"))).then(|| "this CPU lacks avx512_vnni".to_string())
            }
            #[cfg(target_arch = "x86_64")]
            Int8Kernel::Amx => super::amx::int8_unavailable_reason(),
            #[cfg(not(target_arch = "x86_64"))]
            _ => Some("not an x86-64 build".into()),
        }
    }

    pub fn supported(self) -> bool {
        self.unsupported_reason().is_none()
    }

    /// The fastest hardware int8 kernel here, or None (then int8 requests run fp32).
    pub fn best() -> Option<Int8Kernel> {
        [Int8Kernel::Amx, Int8Kernel::Vnni].into_iter().find(|k| k.supported())
    }
}

impl fmt::Display for Int8Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether [`forward`] runs `c` (the same convs as bf16: the image-input conv stays fp32).
pub fn applies(c: &Conv) -> bool {
    super::bf16::applies(c)
}

/// A layer's weights as s8 A tiles, their per-channel scales and sums.
pub struct Packed {
    w: Lines,
    /// Sum of each output channel's quantised weights (`ocp` entries, 0 past `oc`).
    wsum: Vec<i32>,
    /// Per output channel weight scale.
    sw: Vec<f32>,
    oc: usize,
    ocp: usize,
    ic: usize,
    icp: usize,
    kh: usize,
    kw: usize,
    pub kernel: Int8Kernel,
}

/// Pack `c`'s weights for `kernel` (`c` must satisfy [`applies`]).
pub fn pack(c: &Conv, kernel: Int8Kernel) -> Packed {
    let (oc, ic, kh, kw) = (c.num_output, c.num_input, c.kernel_h, c.kernel_w);
    let (ocp, icp) = (oc.div_ceil(32) * 32, ic.div_ceil(64) * 64);
    let (nob, nkc, taps) = (ocp / 16, icp / 64, kh * kw);
    let per = ic * taps;
    let mut buf = Lines::zeroed(taps * nob * nkc * 256);
    let w = buf.as_mut_slice();
    let mut wsum = vec![0i32; ocp];
    let mut sw = vec![1f32; oc];
    for o in 0..oc {
        let ws = &c.weight[o * per..(o + 1) * per];
        let m = ws.iter().fold(0f32, |m, v| m.max(v.abs()));
        let s = if m > 0.0 && m.is_finite() { m / 127.0 } else { 1.0 };
        sw[o] = s;
        let qz = |v: f32| (v / s).round().clamp(-127.0, 127.0) as i8;
        for t in 0..taps {
            for i in 0..ic {
                let q = qz(ws[i * taps + t]);
                wsum[o] += q as i32;
                let (ob, mm, kc, k, b) = (o / 16, o % 16, i / 64, (i % 64) / 4, i % 4);
                w[((t * nob + ob) * nkc + kc) * 256 + mm * 16 + k] |= (q as u8 as u32) << (8 * b);
            }
        }
    }
    Packed { w: buf, wsum, sw, oc, ocp, ic, icp, kh, kw, kernel }
}

/// The kernel of `k` ([`KernelFn`]: the i32 sums `acc`).
fn kernel_fn(k: Int8Kernel) -> KernelFn<i32> {
    match k {
        #[cfg(target_arch = "x86_64")]
        Int8Kernel::Amx => super::amx::kernel_int8,
        #[cfg(target_arch = "x86_64")]
        Int8Kernel::Vnni => kernel_vnni,
        _ => kernel_emulated,
    }
}

/// The portable kernel: `acc = sum w * v` in i32 (what TDPBSSD computes).
unsafe fn kernel_emulated(j: &Job, ob2: usize, blocks: &[(usize, *mut i32)], ldc: usize) {
    for &(q, c) in blocks {
        block_emulated(j, q, ob2, c, ldc);
    }
}

unsafe fn block_emulated(j: &Job, q: usize, ob2: usize, c: *mut i32, ldc: usize) {
    let mut acc = [[0i32; 32]; 32];
    for t in 0..j.kh * j.kw {
        for kc in 0..j.nkc {
            let b = j.b(t, kc, q);
            for half in 0..2 {
                let a = j.a(t, ob2 * 2 + half, kc);
                for k in 0..16 {
                    let brow = std::slice::from_raw_parts(b.add(k * j.kstride), 32);
                    for m in 0..16 {
                        let aw = (*a.add(m * 16 + k)).to_le_bytes().map(|x| x as i8 as i32);
                        let row = &mut acc[half * 16 + m];
                        for (r, &bp) in row.iter_mut().zip(brow) {
                            let bv = bp.to_le_bytes().map(|x| x as i8 as i32);
                            *r = r.wrapping_add(aw[0] * bv[0] + aw[1] * bv[1] + aw[2] * bv[2] + aw[3] * bv[3]);
                        }
                    }
                }
            }
        }
    }
    for (m, row) in acc.iter().enumerate() {
        std::ptr::copy_nonoverlapping(row.as_ptr(), c.add(m * ldc), 32);
    }
}

/// AVX512-VNNI: per 16 outputs x 16 pixels, 16 accumulators started at `-128 * wsum`; each B row
/// (16 pixels x 4 channels, flipped to u8) one vector, each weight quad a 32-bit broadcast.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
unsafe fn kernel_vnni(j: &Job, ob2: usize, blocks: &[(usize, *mut i32)], ldc: usize) {
    for &(q, c) in blocks {
        block_vnni(j, q, ob2, c, ldc);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
unsafe fn block_vnni(j: &Job, q: usize, ob2: usize, c: *mut i32, ldc: usize) {
    let wsum = j.wsum;
    use std::arch::x86_64::*;
    let flip = _mm512_set1_epi32(0x8080_8080u32 as i32);
    for half in 0..2 {
        for pv in 0..2 {
            let mut acc = [_mm512_setzero_si512(); 16];
            for (m, am) in acc.iter_mut().enumerate() {
                *am = _mm512_set1_epi32(wsum[ob2 * 32 + half * 16 + m].wrapping_mul(-128));
            }
            for t in 0..j.kh * j.kw {
                for kc in 0..j.nkc {
                    let a = j.a(t, ob2 * 2 + half, kc);
                    let b = j.b(t, kc, q + pv * 16);
                    for k in 0..16 {
                        let bv = _mm512_xor_si512(_mm512_loadu_si512(b.add(k * j.kstride) as *const _), flip);
                        for (m, am) in acc.iter_mut().enumerate() {
                            *am = _mm512_dpbusd_epi32(*am, bv, _mm512_set1_epi32(*a.add(m * 16 + k) as i32));
                        }
                    }
                }
            }
            for (m, am) in acc.iter().enumerate() {
                _mm512_storeu_si512(c.add((half * 16 + m) * ldc + pv * 16) as *mut _, *am);
            }
        }
    }
}

/// The activation quantisation of one conv input: `q = clamp(round(x * inv) + zp, 0, 255)`.
#[derive(Clone, Copy, Debug)]
struct Quant {
    scale: f32,
    inv: f32,
    zp: f32,
}

impl Quant {
    /// From the range `lo ..= hi` (which must cover every value quantised, the pad value included).
    fn from_range(lo: f32, hi: f32) -> Quant {
        let (lo, hi) = (lo.min(0.0), hi.max(0.0)); // zero stays exact (zero padding, ReLU outputs)
        let s = (hi - lo) / 255.0;
        let scale = if s > 0.0 && s.is_finite() { s } else { 1.0 };
        Quant { scale, inv: 1.0 / scale, zp: (-lo / scale).round().clamp(0.0, 255.0) }
    }

    /// The stored byte `q - 128` of `x`.
    #[inline(always)]
    fn byte(self, x: f32) -> u32 {
        let q = ((x * self.inv).round_ties_even() + self.zp).clamp(0.0, 255.0) as i32;
        (q - 128) as u8 as u32
    }
}

/// Min and max of `p` (NaN ignored), 16 lanes at a time.
#[inline(always)]
fn range_of(p: &[f32]) -> (f32, f32) {
    let (mut lo, mut hi) = ([f32::INFINITY; 16], [f32::NEG_INFINITY; 16]);
    let mut it = p.chunks_exact(16);
    for ch in &mut it {
        for i in 0..16 {
            lo[i] = if ch[i] < lo[i] { ch[i] } else { lo[i] };
            hi[i] = if ch[i] > hi[i] { ch[i] } else { hi[i] };
        }
    }
    let r = it.remainder().iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
    (lo.iter().fold(r.0, |a, &v| a.min(v)), hi.iter().fold(r.1, |a, &v| a.max(v)))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn range_avx512(p: &[f32]) -> (f32, f32) {
    use std::arch::x86_64::*;
    let (mut lo, mut hi) = (_mm512_set1_ps(f32::INFINITY), _mm512_set1_ps(f32::NEG_INFINITY));
    let mut it = p.chunks_exact(16);
    for ch in &mut it {
        let v = _mm512_loadu_ps(ch.as_ptr());
        // min/max(v, acc): a NaN in v leaves acc as it was
        lo = _mm512_min_ps(v, lo);
        hi = _mm512_max_ps(v, hi);
    }
    let r = range_of(it.remainder());
    (_mm512_reduce_min_ps(lo).min(r.0), _mm512_reduce_max_ps(hi).max(r.1))
}

/// `d[i]` = the quad of `planes[0..4][i]` (absent channels 0).
#[inline(always)]
fn pack_row(d: &mut [u32], rows: &[Option<&[f32]>; 4], qt: Quant) {
    for (i, d) in d.iter_mut().enumerate() {
        let mut v = 0u32;
        for (b, r) in rows.iter().enumerate() {
            if let Some(r) = r {
                v |= qt.byte(r[i]) << (8 * b);
            }
        }
        *d = v;
    }
}

/// [`pack_row`] with AVX-512 (F + BW): 16 pixels of the four channels at a time (`vcvtps2dq`
/// rounds to nearest even as `round_ties_even` does; the two saturating packs, i32 to i16 to i8,
/// are the clamp, so the bytes are the scalar loop's), then one in-lane byte shuffle into quads
/// (each 128-bit lane holds 4 pixels of the 4 channels); the tail by the scalar loop.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn pack_row_avx512(d: &mut [u32], rows: &[Option<&[f32]>; 4], qt: Quant) {
    use std::arch::x86_64::*;
    let n = d.len();
    let inv = _mm512_set1_ps(qt.inv);
    let zp = _mm512_set1_epi32(qt.zp as i32 - 128);
    let lane = |r: Option<&[f32]>, i: usize| -> __m512i {
        match r {
            Some(r) => _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(r.as_ptr().add(i)), inv)), zp),
            None => _mm512_setzero_si512(),
        }
    };
    // In each lane, bytes [a0..a3 b0..b3 c0..c3 e0..e3] -> [a0 b0 c0 e0 a1 b1 c1 e1 ...].
    let quads = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    let mut i = 0;
    while i + 16 <= n {
        let ab = _mm512_packs_epi32(lane(rows[0], i), lane(rows[1], i));
        let ce = _mm512_packs_epi32(lane(rows[2], i), lane(rows[3], i));
        let v = _mm512_shuffle_epi8(_mm512_packs_epi16(ab, ce), quads);
        _mm512_storeu_si512(d.as_mut_ptr().add(i) as *mut _, v);
        i += 16;
    }
    let tail = rows.map(|r| r.map(|r| &r[i..]));
    pack_row(&mut d[i..], &tail, qt)
}

/// Kernel probe (tuning; cpu_bench `--kernels`): as [`super::bf16::probe_kernel_ns`], for an int8
/// kernel on random bytes.
#[doc(hidden)]
pub fn probe_kernel_ns(kernel: Int8Kernel, ic: usize, oc: usize, k: usize, w: usize, rows: usize, reps: usize) -> Option<f64> {
    kernel.supported().then_some(())?;
    let shape = ProbeShape { ic, oc, k, w, rows };
    let _tiles = (kernel == Int8Kernel::Amx).then(super::amx::Tiles::config);
    Some(probe_ns::<i32>(kernel_fn(kernel), shape, 4, 64, |s| s & 0x7f7f_7f7f, false, reps))
}

thread_local! {
    /// Each pool thread's quad buffer for its work items (reused: a fresh one costs page faults).
    static QUADS: RefCell<Lines> = RefCell::new(Lines::default());
}

/// The range of the input (`planes`, w x h each; the pad value included when the conv pads),
/// measured in parallel over the planes.
#[allow(clippy::too_many_arguments)]
fn measure(planes: &[&[f32]], w: usize, h: usize, ph: usize, pw: usize, pt: usize, pl: usize, pv: f32) -> Quant {
    #[cfg(target_arch = "x86_64")]
    let wide = std::arch::is_x86_feature_detected!("avx512f");
    let (lo, hi) = planes
        .par_iter()
        .map(|p| {
            let _t = phases::Span::start(4);
            let p = &p[..w * h];
            #[cfg(target_arch = "x86_64")]
            if wide {
                // SAFETY: `wide` is set only when the CPU has AVX-512F.
                return unsafe { range_avx512(p) };
            }
            range_of(p)
        })
        .reduce(|| (f32::INFINITY, f32::NEG_INFINITY), |a, b| (a.0.min(b.0), a.1.max(b.1)));
    let padded = pt > 0 || pl > 0 || ph > h + pt || pw > w + pl;
    let (lo, hi) = if padded { (lo.min(pv), hi.max(pv)) } else { (lo, hi) };
    Quant::from_range(lo, hi)
}

/// How a conv input is converted into the padded quad layout: `[row][icp/4][ks]` u32 (`ks` the
/// [`row_stride`] of `pw`; the columns past `pw` hold the pad value).
struct Convert<'a> {
    planes: &'a [&'a [f32]],
    w: usize,
    h: usize,
    nq: usize,
    ks: usize,
    pt: usize,
    /// First column of the image in a padded row, and the image columns it holds.
    x0: usize,
    nx: usize,
    /// The pad value's byte.
    pb: u32,
    qt: Quant,
    wide: bool,
}

impl<'a> Convert<'a> {
    #[allow(clippy::too_many_arguments)]
    fn new(planes: &'a [&'a [f32]], w: usize, h: usize, icp: usize, pw: usize, pt: usize, pl: usize, pv: f32, qt: Quant) -> Self {
        let x0 = pl.min(pw);
        #[cfg(target_arch = "x86_64")]
        let wide = std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512bw");
        #[cfg(not(target_arch = "x86_64"))]
        let wide = false;
        Convert { planes, w, h, nq: icp / 4, ks: row_stride(pw), pt, x0, nx: w.min(pw - x0), pb: qt.byte(pv), qt, wide }
    }

    /// Padded rows `yy0 ..` into `out` (whole rows of `nq * ks` quads; every element written).
    fn rows(&self, out: &mut [u32], yy0: usize) {
        for (i, rows) in out.chunks_exact_mut(self.nq * self.ks).enumerate() {
            self.row(rows, yy0 + i);
        }
    }

    fn row(&self, rows: &mut [u32], yy: usize) {
        let (w, x0, nx) = (self.w, self.x0, self.nx);
        let iy = yy as isize - self.pt as isize;
        for (kp, row) in rows.chunks_exact_mut(self.ks).enumerate() {
            let chans = [0, 1, 2, 3].map(|b| self.planes.get(4 * kp + b));
            if chans[0].is_none() {
                row.fill(0);
                continue;
            }
            let pad = chans.iter().enumerate().fold(0u32, |a, (b, c)| if c.is_some() { a | self.pb << (8 * b) } else { a });
            if iy < 0 || iy >= self.h as isize {
                row.fill(pad);
                continue;
            }
            let iy = iy as usize;
            row[..x0].fill(pad);
            row[x0 + nx..].fill(pad);
            let src = chans.map(|c| c.map(|p| &p[iy * w..iy * w + nx]));
            let seg = &mut row[x0..x0 + nx];
            #[cfg(target_arch = "x86_64")]
            if self.wide {
                // SAFETY: `wide` is set only when the CPU has AVX-512F and BW.
                unsafe { pack_row_avx512(seg, &src, self.qt) };
                continue;
            }
            pack_row(seg, &src, self.qt);
        }
    }
}

/// The int8 conv of `planes` (w x h each) with its epilogue, as a new num_output x out_h x out_w tensor.
pub(super) fn forward(c: &Conv, p: &Packed, planes: &[&[f32]], w: usize, h: usize, g: ConvGeometry, ops: &RowOps) -> Tensor {
    let mut out = Tensor::zeros(p.oc, g.out_h, g.out_w);
    forward_into(c, p, planes, w, h, g, SendPtr(out.data.as_mut_ptr()), ops);
    out
}

/// One conv `c` (bias and activation fused) on `x` with `kernel`, outside a network: for tests
/// and probes of the kernels (`c` must satisfy [`applies`], `kernel` run here).
pub fn conv_once(c: &Conv, kernel: Int8Kernel, x: &Tensor) -> Result<Tensor> {
    if !applies(c) || x.dims != 3 || x.c != c.num_input {
        crate::bail!(Code::InvalidArgument, "int8 conv_once: conv not covered by int8 or input {} does not match", x.shape_string());
    }
    if let Some(why) = kernel.unsupported_reason() {
        crate::bail!(Code::InvalidArgument, "{}: {why}", kernel.name());
    }
    let g = reference::conv_geometry(c, x.w, x.h)?;
    let planes: Vec<&[f32]> = (0..x.c).map(|i| x.channel(i)).collect();
    let ops = RowOps { isa: Isa::best(), bias: c.bias.as_deref(), act: c.activation, slope: None, residual: &[], plane: g.out_h * g.out_w };
    let p = pack(c, kernel);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().map_err(|e| crate::error::Error::new(Code::Internal, e.to_string()))?;
    Ok(pool.install(|| forward(c, &p, &planes, x.w, x.h, g, &ops)))
}

/// `v` (the i32 sum in an f32 slot) = `(acc - comp) * mul` in place.
#[inline(always)]
fn dequantise(row: &mut [f32], comp: i32, mul: f32) {
    for v in row.iter_mut() {
        *v = ((v.to_bits() as i32).wrapping_sub(comp)) as f32 * mul;
    }
}

/// [`dequantise`] compiled for AVX-512F (16 lanes; the same roundings).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn dequantise_avx512(row: &mut [f32], comp: i32, mul: f32) {
    dequantise(row, comp, mul)
}

/// As [`super::bf16`]'s: per work item, its input rows converted into this thread's quad buffer,
/// the kernels, then the dequantisation and epilogue on its output rows; the input's range is
/// measured first, over all of it.
#[allow(clippy::too_many_arguments)]
fn forward_into(c: &Conv, p: &Packed, planes: &[&[f32]], w: usize, h: usize, g: ConvGeometry, dst: SendPtr, ops: &RowOps) {
    let (oh, ow) = (g.out_h, g.out_w);
    let (ph, pw) = (oh + p.kh - 1, ow + p.kw - 1);
    debug_assert!(planes.len() == p.ic && p.oc == c.num_output);
    let t_conv = phases::start();
    let qt = measure(planes, w, h, ph, pw, g.pad_top, g.pad_left, c.pad_value);
    let cv = Convert::new(planes, w, h, p.icp, pw, g.pad_top, g.pad_left, c.pad_value, qt);
    let rstride = cv.nq * cv.ks;
    let tail = 64 + 2 * cv.ks;
    // Dequantisation: out = (acc - comp[o]) * mul[o].
    let zq = qt.zp as i32 - 128;
    let comp: Vec<i32> = p.wsum[..p.oc].iter().map(|&s| s.wrapping_mul(zq)).collect();
    let mul: Vec<f32> = p.sw.iter().map(|&s| s * qt.scale).collect();
    let kernel = kernel_fn(p.kernel);
    let Split { rows, items: nitems, xblocks } = Split::of(oh, ow, p.ocp);
    let plane_out = oh * ow;
    let amx = p.kernel == Int8Kernel::Amx;
    #[cfg(target_arch = "x86_64")]
    let wide = std::arch::is_x86_feature_detected!("avx512f");
    (0..nitems).into_par_iter().for_each_init(
        || (vec![0i32; 32 * 32], Vec::new()),
        |(scratch, blocks), it| {
            #[allow(clippy::redundant_locals)] // moves the whole Send wrapper into the closure (not its field)
            let dst = dst;
            let (y0, y1) = (it * rows, ((it + 1) * rows).min(oh));
            QUADS.with_borrow_mut(|x| {
                let t_c = phases::start();
                let n = (y1 - y0 + p.kh - 1) * rstride;
                x.resize(n + tail);
                let (body, rest) = x.as_mut_slice().split_at_mut(n);
                rest[..tail].fill(0);
                cv.rows(body, y0);
                phases::add(0, t_c);
                let job = Job { x: x.as_slice(), kstride: cv.ks, rstride, kh: p.kh, kw: p.kw, nkc: p.icp / 64, nob: p.ocp / 16, w: p.w.as_slice(), wsum: &p.wsum };
                let _tiles = amx.then(super::amx::Tiles::config);
                let t_k = phases::start();
                // SAFETY: as in bf16::forward_into (the i32 sums in the f32 slots, converted below).
                unsafe { run_rows(&job, kernel, 0, y1 - y0, ow, p.oc, &xblocks, false, dst.0.add(y0 * ow) as *mut i32, plane_out, scratch, blocks) };
                phases::add(1, t_k);
            });
            let t_e = phases::start();
            for o in 0..p.oc {
                // SAFETY: work items write disjoint row ranges of each output plane.
                let orow = unsafe { std::slice::from_raw_parts_mut(dst.0.add(o * plane_out + y0 * ow), (y1 - y0) * ow) };
                #[cfg(target_arch = "x86_64")]
                if wide {
                    // SAFETY: `wide` is set only when the CPU has AVX-512F.
                    unsafe { dequantise_avx512(orow, comp[o], mul[o]) };
                } else {
                    dequantise(orow, comp[o], mul[o]);
                }
                #[cfg(not(target_arch = "x86_64"))]
                dequantise(orow, comp[o], mul[o]);
                ops.apply(o, y0 * ow, orow);
            }
            phases::add(2, t_e);
        },
    );
    phases::add(3, t_conv);
}
