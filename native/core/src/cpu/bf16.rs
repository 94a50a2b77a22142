//! bf16 direct convolution (stride 1, no dilation, one group, kernels up to 5x5): bf16-rounded
//! inputs and weights, fp32 sums, the conv's fused fp32 epilogue. No Winograd here: its transforms
//! amplify the bf16 rounding; direct bf16 costs ~55 dB PSNR against fp32 on the SR networks.
//!
//! Layout (no im2col): each work item (a band of output rows) converts the input rows it reads
//! (its rows plus `kh - 1`, so neighbouring items convert those twice) into zero-padded bf16
//! channel pairs in its thread's buffer, `[rows][ic/2][Ws]` of u32 (low half: the even channel;
//! `ic` rounded up to 32, padding with the conv's pad value, `Ws` the padded width rounded up to 16
//! so rows start on 64-byte lines; channels past `ic` are 0), and runs the kernels on it while it
//! is in cache: the 16 pair rows of a B tile are `Ws` apart (a few pages, not 16 planes). Each tap
//! `(dy, dx)` is a shifted GEMM whose B tile for outputs `(y, x .. x + 16)` starts at padded row
//! `y + dy`, column `x + dx`. Weights are packed once per layer as `[tap][oc/16][ic/32]` blocks of
//! 16 x 16 pairs (one AMX A tile, 1 KB each, 64-byte aligned; `oc` rounded to 32).
//!
//! A kernel block is 32 output channels x 32 outputs of a row (fp32; one call runs all blocks of a
//! work item for 32 channels, so their A tiles stay in cache): blocks of 32 along
//! each row (the last overlapping the one before; a row narrower than 32 reads past its end and
//! drops those columns), stored straight into the output planes, or through a 32 x 32 scratch for
//! the channels past a multiple of 32 and for narrow rows. The epilogue ([`RowOps`]) then runs on
//! each work item's rows while they are in cache. Kernels
//! ([`Bf16Kernel`]): AMX tiles ([`super::amx`], 2x2 C tiles of TDPBF16PS), AVX512-BF16 `vdpbf16ps`
//! (same layout: a B tile row is one 512-bit vector of 16 pixel pairs), and a portable one that
//! multiplies the same bf16 values in fp32 (bf16 x bf16 products are exact in fp32), for CPUs
//! without either and for tests of the layout on any CPU.

pub use super::bf16_job::{phases, Job};
use super::bf16_job::{probe_ns, run_rows, row_stride, KernelFn, Lines, ProbeShape, Split};
use super::epilogue::RowOps;
use super::ptr::SendPtr;
use crate::ncnn::model::Conv;
use crate::reference::ConvGeometry;
use crate::tensor::Tensor;
use rayon::prelude::*;
use std::fmt;
use std::cell::RefCell;

/// Which bf16 kernel runs (lowest first; a cap picks the best at or below it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Bf16Kernel {
    /// Portable Rust on the bf16-rounded values (slow: for tests and CPUs without bf16 units only
    /// when pinned; [`Bf16Kernel::best`] never returns it for speed).
    Emulated,
    /// AVX512-BF16 `vdpbf16ps` (AMD Zen 4/5, Intel Cooper Lake and later).
    Avx512Bf16,
    /// AMX-BF16 tiles (Intel Sapphire Rapids and later; needs the OS's permission, asked once).
    Amx,
}

impl Bf16Kernel {
    pub const ALL: [Bf16Kernel; 3] = [Bf16Kernel::Emulated, Bf16Kernel::Avx512Bf16, Bf16Kernel::Amx];

    pub fn name(self) -> &'static str {
        match self {
            Bf16Kernel::Emulated => "bf16-emulated",
            Bf16Kernel::Avx512Bf16 => "avx512bf16",
            Bf16Kernel::Amx => "amx-bf16",
        }
    }

    pub fn parse(s: &str) -> Option<Bf16Kernel> {
        match s.trim().to_ascii_lowercase().as_str() {
            "emulated" | "bf16-emulated" | "scalar" => Some(Bf16Kernel::Emulated),
            "avx512bf16" | "avx512_bf16" | "avx512-bf16" => Some(Bf16Kernel::Avx512Bf16),
            "amx" | "amx-bf16" | "amx_bf16" => Some(Bf16Kernel::Amx),
            _ => None,
        }
    }

    /// Whether this CPU (and OS) runs the kernel.
    pub fn supported(self) -> bool {
        self.unsupported_reason().is_none()
    }

    /// Why the kernel cannot run here, or None when it can.
    pub fn unsupported_reason(self) -> Option<String> {
        match self {
            Bf16Kernel::Emulated => None,
            #[cfg(target_arch = "x86_64")]
            Bf16Kernel::Avx512Bf16 => {
                (!(std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512bf16"))).then(|| "this CPU lacks avx512_bf16".to_string())
            }
            #[cfg(target_arch = "x86_64")]
            Bf16Kernel::Amx => super::amx::unavailable_reason(),
            #[cfg(not(target_arch = "x86_64"))]
            _ => Some("not an x86-64 build".into()),
        }
    }

    /// The fastest hardware bf16 kernel here, or None (then bf16 requests run fp32).
    pub fn best() -> Option<Bf16Kernel> {
        [Bf16Kernel::Amx, Bf16Kernel::Avx512Bf16].into_iter().find(|k| k.supported())
    }

    /// The best kernel at or below `cap` that runs here (None: none but the emulated one, which is
    /// only used when pinned exactly).
    pub fn best_up_to(cap: Bf16Kernel) -> Option<Bf16Kernel> {
        if cap == Bf16Kernel::Emulated {
            return Some(Bf16Kernel::Emulated);
        }
        [Bf16Kernel::Amx, Bf16Kernel::Avx512Bf16].into_iter().filter(|&k| k <= cap).find(|k| k.supported())
    }
}

impl fmt::Display for Bf16Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// fp32 -> bf16, round to nearest even (NaN stays a quiet NaN).
#[inline(always)]
pub fn to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

/// bf16 -> fp32 (exact).
#[inline(always)]
pub fn from_bf16(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// Whether [`forward`] runs `c`. Convs reading fewer than 8 channels (a network's image input)
/// stay fp32: they cost little, and rounding the image itself to bf16 cost x4v3 1.5 dB of its
/// PSNR against fp32 (52.3 dB instead of 53.8 on a photo).
pub fn applies(c: &Conv) -> bool {
    c.num_input >= 8
        && c.group == 1 && c.stride_w == 1 && c.stride_h == 1 && c.dilation_w == 1 && c.dilation_h == 1 && c.kernel_w <= 5 && c.kernel_h <= 5
}

/// A layer's weights as bf16 A tiles (see the module doc).
pub struct Packed {
    w: Lines,
    oc: usize,
    ocp: usize,
    ic: usize,
    icp: usize,
    kh: usize,
    kw: usize,
    pub kernel: Bf16Kernel,
}

/// Pack `c`'s weights for `kernel` (`c` must satisfy [`applies`]).
pub fn pack(c: &Conv, kernel: Bf16Kernel) -> Packed {
    let (oc, ic, kh, kw) = (c.num_output, c.num_input, c.kernel_h, c.kernel_w);
    let (ocp, icp) = (oc.div_ceil(32) * 32, ic.div_ceil(32) * 32);
    let (nob, nkc, taps) = (ocp / 16, icp / 32, kh * kw);
    let mut buf = Lines::zeroed(taps * nob * nkc * 256);
    let w = buf.as_mut_slice();
    for t in 0..taps {
        for o in 0..oc {
            for i in (0..ic).step_by(2) {
                let at = |i: usize| if i < ic { to_bf16(c.weight[(o * ic + i) * taps + t]) as u32 } else { 0 };
                let (ob, m, kc, k) = (o / 16, o % 16, i / 32, (i % 32) / 2);
                w[((t * nob + ob) * nkc + kc) * 256 + m * 16 + k] = at(i) | (at(i + 1) << 16);
            }
        }
    }
    Packed { w: buf, oc, ocp, ic, icp, kh, kw, kernel }
}

/// The kernel of `k` ([`KernelFn`]).
fn kernel_fn(k: Bf16Kernel) -> KernelFn<f32> {
    match k {
        #[cfg(target_arch = "x86_64")]
        Bf16Kernel::Amx => super::amx::kernel,
        #[cfg(target_arch = "x86_64")]
        Bf16Kernel::Avx512Bf16 => kernel_avx512bf16,
        _ => kernel_emulated,
    }
}

/// The portable kernel (bf16 values multiplied in fp32).
unsafe fn kernel_emulated(j: &Job, ob2: usize, blocks: &[(usize, *mut f32)], ldc: usize) {
    for &(q, c) in blocks {
        block_emulated(j, q, ob2, c, ldc);
    }
}

unsafe fn block_emulated(j: &Job, q: usize, ob2: usize, c: *mut f32, ldc: usize) {
    let mut acc = [[0f32; 32]; 32];
    for t in 0..j.kh * j.kw {
        for kc in 0..j.nkc {
            let b = j.b(t, kc, q);
            for half in 0..2 {
                let a = j.a(t, ob2 * 2 + half, kc);
                for k in 0..16 {
                    let brow = std::slice::from_raw_parts(b.add(k * j.kstride), 32);
                    for m in 0..16 {
                        let ap = *a.add(m * 16 + k);
                        let (a0, a1) = (from_bf16(ap as u16), from_bf16((ap >> 16) as u16));
                        let row = &mut acc[half * 16 + m];
                        for (r, &bp) in row.iter_mut().zip(brow) {
                            *r += a0 * from_bf16(bp as u16) + a1 * from_bf16((bp >> 16) as u16);
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

/// AVX512-BF16: per 16 outputs x 16 pixels, 16 accumulators; each B row is one vector of 16 pixel
/// pairs, each A pair a 32-bit broadcast.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn kernel_avx512bf16(j: &Job, ob2: usize, blocks: &[(usize, *mut f32)], ldc: usize) {
    for &(q, c) in blocks {
        block_avx512bf16(j, q, ob2, c, ldc);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn block_avx512bf16(j: &Job, q: usize, ob2: usize, c: *mut f32, ldc: usize) {
    use std::arch::x86_64::*;
    for half in 0..2 {
        for pv in 0..2 {
            let mut acc = [_mm512_setzero_ps(); 16];
            for t in 0..j.kh * j.kw {
                for kc in 0..j.nkc {
                    let a = j.a(t, ob2 * 2 + half, kc);
                    let b = j.b(t, kc, q + pv * 16);
                    for k in 0..16 {
                        let bv: __m512bh = std::mem::transmute(_mm512_loadu_si512(b.add(k * j.kstride) as *const _));
                        for (m, am) in acc.iter_mut().enumerate() {
                            let av: __m512bh = std::mem::transmute(_mm512_set1_epi32(*a.add(m * 16 + k) as i32));
                            *am = _mm512_dpbf16_ps(*am, av, bv);
                        }
                    }
                }
            }
            for (m, am) in acc.iter().enumerate() {
                _mm512_storeu_ps(c.add((half * 16 + m) * ldc + pv * 16), *am);
            }
        }
    }
}

/// Kernel probe (tuning; cpu_bench `--kernels`): the fastest of `reps` passes (ns, this thread) of
/// `kernel` over every 32 x 32 block of `rows` output rows `w` wide of an `ic` -> `oc` `k` x `k`
/// conv (random bf16 values; no conversion or epilogue), or None when the kernel cannot run here.
#[doc(hidden)]
pub fn probe_kernel_ns(kernel: Bf16Kernel, ic: usize, oc: usize, k: usize, w: usize, rows: usize, reps: usize) -> Option<f64> {
    kernel.supported().then_some(())?;
    let v = |s: u32| to_bf16((s % 2001) as f32 / 1000.0 - 1.0) as u32;
    let shape = ProbeShape { ic, oc, k, w, rows };
    let _tiles = (kernel == Bf16Kernel::Amx).then(super::amx::Tiles::config);
    Some(probe_ns::<f32>(kernel_fn(kernel), shape, 2, 32, |s| v(s) | v(s >> 11) << 16, true, reps))
}

thread_local! {
    /// Each pool thread's pair buffer for its work items (reused: a fresh one costs page faults).
    static PAIRS: RefCell<Lines> = RefCell::new(Lines::default());
}

/// How a conv input is converted into the padded pair layout: `[row][icp/2][ks]` u32 (`ks` =
/// [`row_stride`] of `pw`; the columns past `pw` hold the pad value).
struct Convert<'a> {
    planes: &'a [&'a [f32]],
    w: usize,
    h: usize,
    npairs: usize,
    ks: usize,
    pt: usize,
    /// First column of the image in a padded row, and the image columns it holds.
    x0: usize,
    nx: usize,
    /// The pad value as bf16.
    pvb: u32,
    /// The row packer: 0 portable, 1 AVX-512F, 2 AVX512-BF16 (`vcvtne2ps2bf16`).
    isa: u8,
}

impl<'a> Convert<'a> {
    #[allow(clippy::too_many_arguments)]
    fn new(planes: &'a [&'a [f32]], w: usize, h: usize, icp: usize, pw: usize, pt: usize, pl: usize, pv: f32) -> Self {
        let x0 = pl.min(pw);
        #[cfg(target_arch = "x86_64")]
        let isa = if std::arch::is_x86_feature_detected!("avx512bf16") && std::arch::is_x86_feature_detected!("avx512bw") {
            2
        } else {
            std::arch::is_x86_feature_detected!("avx512f") as u8
        };
        #[cfg(not(target_arch = "x86_64"))]
        let isa = 0;
        Convert { planes, w, h, npairs: icp / 2, ks: row_stride(pw), pt, x0, nx: w.min(pw - x0), pvb: to_bf16(pv) as u32, isa }
    }

    /// Padded rows `yy0 ..` into `out` (whole rows of `npairs * ks` pairs; every element written).
    fn rows(&self, out: &mut [u32], yy0: usize) {
        for (i, rows) in out.chunks_exact_mut(self.npairs * self.ks).enumerate() {
            self.row(rows, yy0 + i);
        }
    }

    fn row(&self, rows: &mut [u32], yy: usize) {
        let (w, x0, nx) = (self.w, self.x0, self.nx);
        let iy = yy as isize - self.pt as isize;
        for (kp, row) in rows.chunks_exact_mut(self.ks).enumerate() {
            let (c0, c1) = (self.planes.get(2 * kp), self.planes.get(2 * kp + 1));
            let Some(c0) = c0 else {
                row.fill(0); // channels past ic: zeros
                continue;
            };
            let pad = self.pvb | if c1.is_some() { self.pvb << 16 } else { 0 };
            if iy < 0 || iy >= self.h as isize {
                row.fill(pad);
                continue;
            }
            let iy = iy as usize;
            row[..x0].fill(pad);
            row[x0 + nx..].fill(pad);
            let a = &c0[iy * w..iy * w + nx];
            let b = c1.map(|p1| &p1[iy * w..iy * w + nx]);
            let seg = &mut row[x0..x0 + nx];
            // SAFETY: `isa` is set only to what the CPU has.
            #[cfg(target_arch = "x86_64")]
            match self.isa {
                2 => unsafe { pack_row_bf16(seg, a, b) },
                1 => unsafe { pack_row_avx512(seg, a, b) },
                _ => pack_row(seg, a, b),
            }
            #[cfg(not(target_arch = "x86_64"))]
            pack_row(seg, a, b);
        }
    }
}

/// `d[i]` = the pair (bf16 `a[i]`, bf16 `b[i]` or 0).
#[inline(always)]
fn pack_row(d: &mut [u32], a: &[f32], b: Option<&[f32]>) {
    match b {
        Some(b) => {
            for ((d, &x), &y) in d.iter_mut().zip(a).zip(b) {
                *d = to_bf16(x) as u32 | ((to_bf16(y) as u32) << 16);
            }
        }
        None => d.iter_mut().zip(a).for_each(|(d, &x)| *d = to_bf16(x) as u32),
    }
}

/// [`pack_row`] compiled for AVX-512F (the closures of the parallel loop do not inherit a
/// caller's target features, so the row loop gets its own function).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn pack_row_avx512(d: &mut [u32], a: &[f32], b: Option<&[f32]>) {
    pack_row(d, a, b)
}


/// [`pack_row`] with `vcvtne2ps2bf16` (two planes' 16 values to bf16, round to nearest even, NaN
/// quieted as [`to_bf16`] does; denormals become zero, which [`to_bf16`] would keep) and one word
/// permute into pairs; the tail by [`pack_row`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn pack_row_bf16(d: &mut [u32], a: &[f32], b: Option<&[f32]>) {
    use std::arch::x86_64::*;
    let n = d.len().min(a.len());
    // Word j of a pair vector: j even, word j/2 of `a` (lanes 0-15); odd, of `b` (lanes 16-31).
    let idx = _mm512_set_epi16(
        31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0,
    );
    let mut i = 0;
    while i + 16 <= n {
        let va = _mm512_loadu_ps(a.as_ptr().add(i));
        let vb = match b {
            Some(b) => _mm512_loadu_ps(b.as_ptr().add(i)),
            None => _mm512_setzero_ps(),
        };
        let h: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(vb, va));
        _mm512_storeu_si512(d.as_mut_ptr().add(i) as *mut _, _mm512_permutexvar_epi16(idx, h));
        i += 16;
    }
    pack_row(&mut d[i..n], &a[i..n], b.map(|b| &b[i..n]));
}

/// The bf16 conv of `planes` (w x h each) with its epilogue, as a new num_output x out_h x out_w
/// tensor (not zeroed first: every element is written before the epilogue reads it).
pub fn forward(c: &Conv, p: &Packed, planes: &[&[f32]], w: usize, h: usize, g: ConvGeometry, ops: &RowOps) -> Tensor {
    let n = p.oc * g.out_h * g.out_w;
    let mut buf: Vec<std::mem::MaybeUninit<f32>> = Vec::with_capacity(n);
    // SAFETY: MaybeUninit elements need no initialisation.
    unsafe { buf.set_len(n) };
    forward_into(c, p, planes, w, h, g, SendPtr(buf.as_mut_ptr() as *mut f32), ops);
    let mut buf = std::mem::ManuallyDrop::new(buf);
    // SAFETY: forward_into wrote all n elements (every channel < num_output, row and column: the
    // row tiles cover each row, the last one overlapping; the scratch path copies whole rows); same
    // allocation, length and capacity, f32 and MaybeUninit<f32> have one layout.
    let data = unsafe { Vec::from_raw_parts(buf.as_mut_ptr() as *mut f32, n, buf.capacity()) };
    Tensor::from_vec(p.oc, g.out_h, g.out_w, data)
}

/// Per work item (output rows `y0 .. y1`): its input rows converted into this thread's pair buffer
/// (the `kh - 1` rows shared with the next item converted by both), the kernels over them, then
/// the epilogue on its output rows, all while they are in this core's cache.
#[allow(clippy::too_many_arguments)]
fn forward_into(c: &Conv, p: &Packed, planes: &[&[f32]], w: usize, h: usize, g: ConvGeometry, dst: SendPtr, ops: &RowOps) {
    let (oh, ow) = (g.out_h, g.out_w);
    let pw = ow + p.kw - 1;
    debug_assert!(planes.len() == p.ic && p.oc == c.num_output);
    let t_conv = phases::start();
    let cv = Convert::new(planes, w, h, p.icp, pw, g.pad_top, g.pad_left, c.pad_value);
    let rstride = cv.npairs * cv.ks;
    let tail = 64 + 2 * cv.ks;
    let kernel = kernel_fn(p.kernel);
    let Split { rows, items: nitems, xblocks } = Split::of(oh, ow, p.ocp);
    let plane_out = oh * ow;
    let amx = p.kernel == Bf16Kernel::Amx;
    (0..nitems).into_par_iter().for_each_init(
        || (vec![0f32; 32 * 32], Vec::new()),
        |(scratch, blocks), it| {
            #[allow(clippy::redundant_locals)] // moves the whole Send wrapper into the closure (not its field)
            let dst = dst;
            let (y0, y1) = (it * rows, ((it + 1) * rows).min(oh));
            PAIRS.with_borrow_mut(|x| {
                let t_c = phases::start();
                let n = (y1 - y0 + p.kh - 1) * rstride;
                x.resize(n + tail);
                let (body, rest) = x.as_mut_slice().split_at_mut(n);
                rest[..tail].fill(0);
                cv.rows(body, y0);
                phases::add(0, t_c);
                let job = Job { x: x.as_slice(), kstride: cv.ks, rstride, kh: p.kh, kw: p.kw, nkc: p.icp / 32, nob: p.ocp / 16, w: p.w.as_slice(), wsum: &[] };
                let _tiles = amx.then(super::amx::Tiles::config);
                let t_k = phases::start();
                // SAFETY: dst holds the oc planes (rows y0 .. y1 from dst + y0 * ow); B reads stay
                // inside the pair buffer (its tail covers the overrun of the last row); the kernel
                // was chosen by what this CPU supports (Packed::kernel is only set so), with this
                // thread's tile configuration for AMX; work items own their rows.
                unsafe { run_rows(&job, kernel, 0, y1 - y0, ow, p.oc, &xblocks, true, dst.0.add(y0 * ow), plane_out, scratch, blocks) };
                phases::add(1, t_k);
            });
            let t_e = phases::start();
            for o in 0..p.oc {
                // SAFETY: work items write disjoint row ranges of each output plane.
                let orow = unsafe { std::slice::from_raw_parts_mut(dst.0.add(o * plane_out + y0 * ow), (y1 - y0) * ow) };
                ops.apply(o, y0 * ow, orow);
            }
            phases::add(2, t_e);
        },
    );
    phases::add(3, t_conv);
}
