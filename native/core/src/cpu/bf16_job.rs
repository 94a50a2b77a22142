//! What a bf16 kernel call reads ([`Job`]): the padded pair layout and the packed weights of
//! [`super::bf16`], and where a tap's A and B tiles start. A leaf module: the kernels in
//! [`super::bf16`] and [`super::amx`] both read it.

/// What a kernel call reads.
pub struct Job<'a> {
    /// Input pairs, `[Hp][icp/2][Wp]` plus a zero tail.
    pub x: &'a [u32],
    /// Pairs between the rows of a B tile (channel pairs): `Wp`.
    pub kstride: usize,
    /// Pairs between image rows: `icp/2 * Wp`.
    pub rstride: usize,
    pub kh: usize,
    pub kw: usize,
    /// 32-channel chunks of the input.
    pub nkc: usize,
    /// 16-channel blocks of the output.
    pub nob: usize,
    pub w: &'a [u32],
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
