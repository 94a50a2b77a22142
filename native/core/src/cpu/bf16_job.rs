//! What a bf16 kernel call reads ([`Job`]): the padded pair layout and the packed weights of
//! [`super::bf16`], and where a tap's A and B tiles start. A leaf module: the kernels in
//! [`super::bf16`] and [`super::amx`] both read it.

/// One 64-byte line of a [`Lines`] buffer.
#[repr(C, align(64))]
#[derive(Clone, Copy, Default)]
pub struct Line([u32; 16]);

/// A u32 buffer that starts on a 64-byte boundary, so that tile rows (64 bytes) at multiples of 16
/// elements do not straddle two cache lines: the packed weights (every A tile row) and the
/// converted inputs (their rows are [`row_stride`] apart, so the B rows of the taps without a
/// column shift are aligned too). Unaligned rows cost the AMX kernels ~15-40% (two lines per row).
#[derive(Default)]
pub struct Lines(Vec<Line>);

impl Lines {
    /// `n` zeros.
    pub fn zeroed(n: usize) -> Lines {
        Lines(vec![Line::default(); n.div_ceil(16)])
    }

    /// Resizes to at least `n` elements: new lines are zero, kept ones keep their old values.
    pub fn resize(&mut self, n: usize) {
        self.0.resize(n.div_ceil(16), Line::default());
    }

    pub fn as_slice(&self) -> &[u32] {
        // SAFETY: Line is 16 u32 with no padding (repr C, size 64).
        unsafe { std::slice::from_raw_parts(self.0.as_ptr() as *const u32, self.0.len() * 16) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u32] {
        // SAFETY: as in as_slice.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr() as *mut u32, self.0.len() * 16) }
    }
}

/// The row stride (elements) of a converted input `pw` columns wide: a multiple of 16 (64 bytes).
pub fn row_stride(pw: usize) -> usize {
    pw.div_ceil(16) * 16
}

/// What a kernel call reads.
pub struct Job<'a> {
    /// Input pairs, `[Hp][icp/2][kstride]` plus a zero tail (64-byte aligned).
    pub x: &'a [u32],
    /// Pairs between the rows of a B tile (channel pairs): [`row_stride`] of `Wp`.
    pub kstride: usize,
    /// Pairs between image rows: `icp/2 * kstride`.
    pub rstride: usize,
    pub kh: usize,
    pub kw: usize,
    /// 32-channel chunks of the input.
    pub nkc: usize,
    /// 16-channel blocks of the output.
    pub nob: usize,
    /// The packed weights (64-byte aligned).
    pub w: &'a [u32],
    /// The int8 weight sums per output channel (the VNNI kernel's compensation; empty for bf16).
    pub wsum: &'a [i32],
}

impl Job<'_> {
    /// The A tile (16 outputs x 16 pairs) of tap `t`, output block `ob`, input chunk `kc`.
    #[inline(always)]
    pub fn a(&self, t: usize, ob: usize, kc: usize) -> *const u32 {
        self.w[((t * self.nob + ob) * self.nkc + kc) * 256..].as_ptr()
    }
    /// Where the B tile (16 pairs x 16 outputs from `q = y * rstride + x`) of tap `t`, chunk `kc`
    /// starts; its rows are `kstride` pairs apart.
    #[inline(always)]
    pub fn b(&self, t: usize, kc: usize, q: usize) -> *const u32 {
        let (dy, dx) = (t / self.kw, t % self.kw);
        self.x[q + dy * self.rstride + kc * 16 * self.kstride + dx..].as_ptr()
    }
}

/// A kernel: for each block `(q, c)` of `blocks`, the 32 channels `32 * ob2 ..` of outputs
/// `q .. q + 32` (4-byte sums: f32 for bf16, i32 for int8) into `c` (row stride `ldc` elements).
///
/// # Safety
/// Each `c` must hold 32 rows of `ldc >= 32` elements, every B row read must lie in `j.x`, and the
/// CPU must run the kernel's instructions (AMX: this thread holds a live tile configuration).
pub type KernelFn<T> = unsafe fn(&Job, usize, &[(usize, *mut T)], usize);

/// The output rows `y0 .. y1` (all channels) of a conv computed by `kernel` into `dst` (`oc`
/// planes of `oh` x `ow`, `plane` elements apart): per 32 channels, the blocks of those rows at
/// multiples of 32 columns in one kernel call (their A tiles stay in cache from block to block),
/// stored straight into the planes; one by one through `scratch` (32 x 32), of which only the
/// columns not stored yet are copied out, the last block of a row that overlaps the one before
/// (the kernels may store a block in passes, each adding to what the last one stored, so blocks
/// stored in place must not overlap), the channels past a multiple of 32 and rows narrower than 32.
/// `by_column`: the blocks of a column before the next column (consecutive blocks share two thirds
/// of their B rows in a 3x3 conv: bf16 64->64 kernels ~15% faster on this Xeon), else row by row
/// (int8: no gain measured).
///
/// # Safety
/// `dst` must hold the `oc` planes, `job` must be the conv's layout (B reads inside `x`), the
/// kernel must run here, and no other thread may write these rows.
#[allow(clippy::too_many_arguments)]
pub unsafe fn run_rows<T: Copy>(job: &Job, kernel: KernelFn<T>, y0: usize, y1: usize, ow: usize, oc: usize, xblocks: &[usize], by_column: bool, dst: *mut T, plane: usize, scratch: &mut [T], blocks: &mut Vec<(usize, *mut T)>) {
    let full = oc / 32;
    for ob2 in 0..job.nob / 2 {
        let direct = ob2 < full && ow >= 32;
        if direct {
            blocks.clear();
            let block = |y: usize, xb: usize| (y * job.rstride + xb, dst.add(ob2 * 32 * plane + y * ow + xb));
            if by_column {
                for &xb in xblocks.iter().filter(|&&xb| xb % 32 == 0) {
                    blocks.extend((y0..y1).map(|y| block(y, xb)));
                }
            } else {
                for y in y0..y1 {
                    blocks.extend(xblocks.iter().filter(|&&xb| xb % 32 == 0).map(|&xb| block(y, xb)));
                }
            }
            kernel(job, ob2, blocks, plane);
        }
        // Columns from here on are not stored yet by the direct blocks.
        let done = if direct { ow / 32 * 32 } else { 0 };
        for y in y0..y1 {
            for &xb in xblocks.iter().filter(|&&xb| !direct || xb % 32 != 0) {
                kernel(job, ob2, &[(y * job.rstride + xb, scratch.as_mut_ptr())], 32);
                let c0 = xb.max(done);
                let width = (xb + 32).min(ow) - c0;
                for o in ob2 * 32..oc.min(ob2 * 32 + 32) {
                    std::ptr::copy_nonoverlapping(scratch.as_ptr().add((o - ob2 * 32) * 32 + c0 - xb), dst.add(o * plane + y * ow + c0), width);
                }
            }
        }
    }
}

/// How a conv's output is cut into parallel work items and 32-wide column blocks (the bf16 and int8
/// drivers share it).
pub struct Split {
    /// Output rows per work item: its output stays in L2 for the epilogue, and there are enough
    /// items to keep every thread busy.
    pub rows: usize,
    pub items: usize,
    /// First column of each block of 32 outputs per row, the last one overlapping the one before
    /// when `ow` is not a multiple of 32 (a row narrower than 32: one block, its extra columns dropped).
    pub xblocks: Vec<usize>,
}

/// Floats of output per work item (512 KB: in L2 for the epilogue).
const OUT_BUDGET: usize = 128 << 10;

impl Split {
    pub fn of(oh: usize, ow: usize, ocp: usize) -> Split {
        let threads = rayon::current_num_threads().max(1);
        let by_budget = (OUT_BUDGET / (ocp * ow)).max(1);
        let rows = by_budget.min(oh.div_ceil(threads * 3)).clamp(1, oh.max(1));
        let xblocks = if ow >= 32 { (0..ow.div_ceil(32)).map(|b| (b * 32).min(ow - 32)).collect() } else { vec![0] };
        Split { rows, items: oh.div_ceil(rows), xblocks }
    }
}

/// Phase timers of the bf16 and int8 convs, for probes (cpu_bench `--phases`): off unless
/// [`phases::set_phase_timing`] turned them on; then each conv adds its phases' times: CPU time of
/// the calling thread (so a loaded machine's preemption is not counted) for the conversion and the
/// whole conv, and of the worker threads, summed over the work items, for kernels and epilogue.
/// The shape of a kernel probe (cpu_bench `--kernels`): an `ic` -> `oc` `k` x `k` conv over every
/// 32 x 32 block of `rows` output rows `w` wide.
#[derive(Clone, Copy, Debug)]
pub struct ProbeShape {
    pub ic: usize,
    pub oc: usize,
    pub k: usize,
    pub w: usize,
    pub rows: usize,
}

/// The probe of one kernel (bf16 and int8 share it): the fastest of `reps` passes (ns, this thread)
/// of `kernel` on pseudo-random words from `word` (`per` channels a word: 2 bf16 or 4 int8; input
/// channels rounded up to `chunk`), no conversion or epilogue, on the calling thread (an AMX kernel
/// needs the caller's tile configuration); `by_column` is the driver's block order for that precision.
pub fn probe_ns<T: Copy + Default>(kernel: KernelFn<T>, s: ProbeShape, per: usize, chunk: usize, word: impl Fn(u32) -> u32, by_column: bool, reps: usize) -> f64 {
    assert!(s.w >= 32, "probe rows are at least 32 wide");
    let (icp, ocp, ks) = (s.ic.div_ceil(chunk) * chunk, s.oc.div_ceil(32) * 32, row_stride(s.w + s.k - 1));
    let rstride = icp / per * ks;
    let mut seed = 0x9e37_79b9u32;
    let mut fill = |l: &mut Lines| {
        for v in l.as_mut_slice() {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            *v = word(seed);
        }
    };
    let mut x = Lines::zeroed((s.rows + s.k) * rstride + 64 + 2 * ks);
    fill(&mut x);
    let mut wt = Lines::zeroed(s.k * s.k * (ocp / 16) * (icp / chunk) * 256);
    fill(&mut wt);
    let wsum = vec![0i32; ocp];
    let job = Job { x: x.as_slice(), kstride: ks, rstride, kh: s.k, kw: s.k, nkc: icp / chunk, nob: ocp / 16, w: wt.as_slice(), wsum: &wsum };
    let xblocks = Split::of(s.rows, s.w, ocp).xblocks;
    let plane = s.rows * s.w;
    let mut out = vec![T::default(); ocp * plane];
    let (mut scratch, mut blocks) = (vec![T::default(); 32 * 32], Vec::new());
    let mut best = f64::INFINITY;
    for _ in 0..reps.max(1) {
        let t = phases::thread_ns();
        // SAFETY: `out` holds the ocp planes, B reads stay inside `x` (its tail), and the caller
        // passes a kernel this CPU runs (tiles configured for an AMX one).
        unsafe { run_rows(&job, kernel, 0, s.rows, s.w, ocp, &xblocks, by_column, out.as_mut_ptr(), plane, &mut scratch, &mut blocks) };
        best = best.min((phases::thread_ns() - t) as f64);
    }
    std::hint::black_box(&out);
    best
}

pub mod phases {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

    static ON: AtomicBool = AtomicBool::new(false);
    static NS: [AtomicU64; 5] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
    pub const NAMES: [&str; 5] = ["convert", "kernels", "epilogue", "conv", "int8 range"];

    pub fn set_phase_timing(on: bool) {
        ON.store(on, Relaxed);
    }

    /// The totals in ms since the last call, and resets them.
    pub fn take_ms() -> [f64; 5] {
        NS.each_ref().map(|a| a.swap(0, Relaxed) as f64 / 1e6)
    }

    /// This thread's CPU time (ns): `clock_gettime(CLOCK_THREAD_CPUTIME_ID)` on x86-64 Linux, else
    /// a monotonic clock.
    pub fn thread_ns() -> u64 {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        {
            let mut ts = [0i64; 2];
            let r: i64;
            // SAFETY: clock_gettime (syscall 228) with CLOCK_THREAD_CPUTIME_ID (3) writes 16 bytes to ts.
            unsafe {
                std::arch::asm!("syscall", inlateout("rax") 228i64 => r, in("rdi") 3i64, in("rsi") ts.as_mut_ptr(),
                    lateout("rcx") _, lateout("r11") _, options(nostack));
            }
            if r == 0 {
                return ts[0] as u64 * 1_000_000_000 + ts[1] as u64;
            }
        }
        static T0: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        T0.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
    }

    /// A start time when the timers are on.
    #[inline]
    pub fn start() -> Option<u64> {
        ON.load(Relaxed).then(thread_ns)
    }

    /// Adds the time since `t` (if timing) to phase `i`.
    #[inline]
    pub fn add(i: usize, t: Option<u64>) {
        if let Some(t) = t {
            NS[i].fetch_add(thread_ns().saturating_sub(t), Relaxed);
        }
    }

    /// Adds its lifetime to a phase on drop (when timing).
    pub struct Span(usize, Option<u64>);

    impl Span {
        pub fn start(i: usize) -> Span {
            Span(i, start())
        }
    }

    impl Drop for Span {
        fn drop(&mut self) {
            add(self.0, self.1);
        }
    }
}
