//! Matrix-multiply-accumulate (tensor-core) implicit-GEMM convolution.
//!
//! One template, two ways to run it:
//! - [`MmaMode::Coop`]: wgpu's experimental cooperative matrices (`enable wgpu_cooperative_matrix;`,
//!   `coop_mat16x16` / `coop_mat8x8`, f16 A/B, f32 accumulator C), i.e. VK_KHR_cooperative_matrix
//!   on NVIDIA / AMD, simdgroup matrices on Apple. Picked at runtime only when the adapter lists
//!   the F x F x F f16 x f16 -> f32 configuration (see [`pick_frag`]).
//! - [`MmaMode::Emulated`]: the same tiling and the same index arithmetic, with "subgroups" of
//!   a fixed size made of consecutive invocations and each fragment operation replaced by a loop
//!   over the same tile elements with the same row/column-major meaning. It runs anywhere
//!   (lavapipe), so CI checks the kernel's indexing against the CPU reference.
//!
//! GEMM view (as the FMA kernel in `conv_gemm.rs`): C[M = out channels][N = pixels] =
//! A[M][K] x B[K][N], K = in_c * kh * kw, per group (workgroup z). Per K step of BK:
//! - `As` (f16, BK x BM) holds A column-major: element (m, k) at `k * BM + m`, loaded from the
//!   weights laid out `[group][kpad][mpad]` (the same buffer layout as the FMA kernel);
//! - `Bs` (f16, BK x BN) holds B row-major: element (k, n) at `k * BN + n` (the im2col gather);
//! - each subgroup owns `R` warp tiles of WM x WN fragments of F x F and multiplies
//!   `coopLoad` (column-major) A fragments by `coopLoadT` (row-major) B fragments.
//!
//! Pipelined (`MmaCfg::pipelined`, `LUCENT_GPU_PIPELINE=1`): `As` and `Bs` have two stages;
//! the next K slice is fetched into registers while the current stage is multiplied, then
//! stored into the other stage, so a slice costs one barrier and its memory latency overlaps
//! the matrix operations.
//!
//! After the K loop the fragments go row-major into `Cs` (f32, BM x BN) and every invocation
//! applies the fused epilogue (bias, activation, PReLU, residual) with coalesced writes.
//! Workgroup tiles whose warp tiles outnumber the subgroups (larger subgroups than planned) are
//! covered by the `R` warp tiles per subgroup, planned for the adapter's largest subgroup size.

use super::conv::{conv_common, ConvCall};
use super::conv_gemm::{dispatch_gemm, gemm_words, GEMM_GATHER, GEMM_PROLOGUE};
use super::{header_with, pipeline};
use crate::rec::Rec;
use crate::DevCtx;
use lucent_core::error::Result;

/// Which implementation of the fragment operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MmaMode {
    /// Real cooperative matrices; `sg_max` = the adapter's largest subgroup size (plans `R`).
    Coop { sg_max: u32 },
    /// Loops over the same tiles, "subgroups" of `sg` consecutive invocations.
    /// `f16_tiles`: workgroup tiles in f16 (needs SHADER_F16); otherwise f32 tiles holding
    /// values rounded to f16 (pack2x16float), the same numbers.
    Emulated { sg: u32, f16_tiles: bool },
}

/// Tile configuration of the MMA convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MmaCfg {
    /// Fragment size F (8 or 16): fragments are F x F, K step F.
    pub frag: u32,
    /// Output channels per workgroup tile.
    pub bm: u32,
    /// Output pixels per workgroup tile.
    pub bn: u32,
    /// K slice staged per step.
    pub bk: u32,
    /// Fragments per warp tile along M and N.
    pub wm: u32,
    pub wn: u32,
    /// Invocations per workgroup.
    pub wg: u32,
    /// Double-buffered K slices: the next slice is fetched into registers while the current one
    /// is multiplied, then stored into the other of two tile buffers; one barrier per slice.
    pub pipelined: bool,
}

impl MmaCfg {
    /// Warp tiles per workgroup tile.
    pub fn warp_tiles(&self) -> u32 {
        (self.bm / (self.wm * self.frag)) * (self.bn / (self.wn * self.frag))
    }
    /// Warp tiles each subgroup must hold when subgroups have `sg` invocations.
    pub fn per_subgroup(&self, sg: u32) -> u32 {
        let nsg = (self.wg / sg.max(1)).max(1);
        self.warp_tiles().div_ceil(nsg)
    }
    /// The same tiles, pipelined.
    pub const fn pipelined(self) -> MmaCfg {
        MmaCfg { pipelined: true, ..self }
    }
    pub fn shared_bytes(&self, f16_tiles: bool) -> u32 {
        // As + Bs (twice when pipelined), then Cs with its scratch rows for surplus subgroups.
        let stages = if self.pipelined { 2 } else { 1 };
        (self.bk * self.bm + self.bk * self.bn) * if f16_tiles { 2 } else { 4 } * stages + (self.bm + self.wm * self.frag) * self.bn * 4
    }
    pub fn valid(&self) -> bool {
        let f = self.frag;
        (f == 8 || f == 16)
            && self.wm > 0
            && self.wn > 0
            && self.wg > 0
            && self.bk.is_multiple_of(f)
            && self.bm.is_multiple_of(self.wm * f)
            && self.bn.is_multiple_of(self.wn * f)
            && (self.bk * self.bm).is_multiple_of(self.wg)
            && (self.bk * self.bn).is_multiple_of(self.wg)
            && self.wg.is_multiple_of(self.bn)
            && self.bn.is_power_of_two()
    }
    /// Whether `mode` can run this configuration (emulated subgroups must divide the workgroup
    /// and a fragment).
    pub fn fits(&self, mode: MmaMode) -> bool {
        match mode {
            MmaMode::Coop { .. } => self.valid(),
            MmaMode::Emulated { sg, .. } => {
                self.valid() && sg > 0 && self.wg.is_multiple_of(sg) && (self.frag * self.frag).is_multiple_of(sg)
            }
        }
    }
}

/// The tile configurations tried, widest first: (wide M list, narrow M list) for fragment F.
pub fn cfg_lists(frag: u32) -> (Vec<MmaCfg>, Vec<MmaCfg>) {
    let c = |bm, bn, bk, wm, wn, wg| MmaCfg { frag, bm, bn, bk, wm, wn, wg, pipelined: false };
    if frag == 16 {
        (
            vec![c(64, 64, 32, 2, 2, 128), c(32, 64, 16, 1, 2, 128), c(16, 64, 16, 1, 1, 128)],
            vec![c(16, 128, 32, 1, 2, 128), c(16, 64, 16, 1, 1, 128)],
        )
    } else {
        (
            vec![c(32, 64, 16, 2, 2, 128), c(16, 32, 16, 1, 1, 128)],
            vec![c(16, 64, 16, 1, 2, 128), c(16, 32, 16, 1, 1, 128)],
        )
    }
}

/// The first configuration of the list that fits the device's limits (pipelined: in that
/// form, whose tiles take twice the workgroup memory).
pub fn default_cfg(limits: &wgpu::Limits, frag: u32, small_m: bool, mode: MmaMode, pipelined: bool) -> Option<MmaCfg> {
    let (wide, narrow) = cfg_lists(frag);
    let list = if small_m { narrow } else { wide };
    list.into_iter().map(|c| if pipelined { c.pipelined() } else { c }).find(|c| fits_device(c, limits, mode))
}

/// Whether configuration `c` runs in `mode` within the device's limits (workgroup size and
/// workgroup memory).
pub fn fits_device(c: &MmaCfg, limits: &wgpu::Limits, mode: MmaMode) -> bool {
    let f16_tiles = !matches!(mode, MmaMode::Emulated { f16_tiles: false, .. });
    let threads = limits.max_compute_invocations_per_workgroup.min(limits.max_compute_workgroup_size_x);
    c.fits(mode) && c.wg <= threads && c.shared_bytes(f16_tiles) <= limits.max_compute_workgroup_storage_size
}

/// The fragment size to use with the adapter's cooperative-matrix configurations: 16 when
/// 16x16x16 f16 x f16 -> f32 is listed, else 8 when 8x8x8 is; None otherwise.
pub fn pick_frag(props: &[wgpu::CooperativeMatrixProperties]) -> Option<u32> {
    let has = |f: u32| {
        props.iter().any(|p| {
            p.m_size == f
                && p.n_size == f
                && p.k_size == f
                && p.ab_type == wgpu::CooperativeScalarType::F16
                && p.cr_type == wgpu::CooperativeScalarType::F32
        })
    };
    [16, 8].into_iter().find(|&f| has(f))
}

/// WGSL of the MMA convolution for storage precision `f16` (T), configuration `c` and `mode`.
/// Parameters, bindings and weights are the FMA GEMM's (`conv_gemm.rs`: `GemmParams`, the
/// gather table, `pack_weights`).
pub fn conv_mma(f16: bool, c: MmaCfg, mode: MmaMode) -> String {
    assert!(c.fits(mode), "MMA configuration {c:?} does not fit {mode:?}");
    let (coop, sg, tiles16) = match mode {
        MmaMode::Coop { sg_max } => (true, sg_max.max(1), true),
        MmaMode::Emulated { sg, f16_tiles } => (false, sg, f16_tiles),
    };
    let f = c.frag;
    let r_tiles = c.per_subgroup(sg);
    // Directives come first in WGSL.
    let mut s = String::from(if coop { "enable wgpu_cooperative_matrix;\n" } else { "" });
    s.push_str(&header_with(f16, tiles16 || f16));
    s.push_str(&conv_common());
    s.push_str(GEMM_GATHER);
    let tt = if tiles16 { "f16" } else { "f32" };
    s.push_str(&format!(
        "alias TT = {tt};\nconst BM: u32 = {}u;\nconst BN: u32 = {}u;\nconst BK: u32 = {}u;\nconst F: u32 = {f}u;\nconst WM: u32 = {}u;\nconst WN: u32 = {}u;\nconst NWN: u32 = {}u;\nconst NW: u32 = {}u;\nconst WG: u32 = {}u;\nconst NS: u32 = {}u;\n",
        c.bm,
        c.bn,
        c.bk,
        c.wm,
        c.wn,
        c.bn / (c.wn * f),
        c.warp_tiles(),
        c.wg,
        if c.pipelined { 2 } else { 1 }
    ));
    // Rounding of a staged value to the tile type (f16 semantics in both cases). Without f16,
    // r16 rounds the f32 mantissa to f16's 10 bits, to nearest even (core WGSL only; equal to
    // f16 rounding in f16's normal range, finer for |v| < 6.1e-5, which a sum of O(1) terms
    // does not see).
    let to_tile = if tiles16 { "TT(v)" } else { "r16(v)" };
    if !tiles16 {
        s.push_str("fn r16(v: f32) -> f32 {\n    let b = bitcast<u32>(v);\n    return bitcast<f32>((b + 0xFFFu + ((b >> 13u) & 1u)) & 0xFFFFE000u);\n}\n");
    }
    let sg_builtins = if coop {
        ", @builtin(subgroup_id) sgid: u32, @builtin(num_subgroups) nsgb: u32"
    } else {
        ""
    };
    let (sg_expr, nsg_expr) = if coop {
        ("sgid".to_string(), "nsgb".to_string())
    } else {
        (format!("li / {sg}u"), format!("WG / {sg}u"))
    };
    let prologue = GEMM_PROLOGUE;
    s.push_str(&format!(
        r#"
var<workgroup> As: array<TT, NS * BK * BM>;
var<workgroup> Bs: array<TT, NS * BK * BN>;
var<workgroup> Cs: array<f32, BM * BN + WM * F * BN>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>{sg_builtins}) {{
{prologue}    let sg = {sg_expr};
    let nsg = {nsg_expr};
"#
    ));
    // Warp tiles of this subgroup: wt = sg + r * nsg; fragment (i, j) of warp tile r covers
    // rows wmo{{r}} + i * F, columns wno{{r}} + j * F of the workgroup tile. Matrix operations
    // must be in uniform control flow, so a subgroup past the last warp tile (wt >= NW: more
    // subgroups than planned) computes the last one again and stores it to the scratch rows
    // after BM * BN (`cso{{r}}`), which nothing reads.
    for r in 0..r_tiles {
        s.push_str(&format!(
            "    let wt{r} = min(sg + {r}u * nsg, NW - 1u);\n    let on{r} = sg + {r}u * nsg < NW;\n    let wmo{r} = (wt{r} / NWN) * (WM * F);\n    let wno{r} = (wt{r} % NWN) * (WN * F);\n    let cso{r} = select(BM * BN + wno{r}, wmo{r} * BN + wno{r}, on{r});\n"
        ));
    }
    if !coop {
        s.push_str(&format!("    let lane = li % {sg}u;\n"));
    }
    let per_lane = if coop { 0 } else { f * f / sg };
    // Accumulators.
    for r in 0..r_tiles {
        for i in 0..c.wm {
            for j in 0..c.wn {
                if coop {
                    s.push_str(&format!("    var c{r}_{i}_{j} = coop_mat{f}x{f}<f32, C>();\n"));
                } else {
                    for e in 0..per_lane {
                        s.push_str(&format!("    var c{r}_{i}_{j}_{e} = 0.0;\n"));
                    }
                }
            }
        }
    }
    // Staging of one K slice from k0: A (weights, column-major tile) and B (the im2col gather,
    // row-major tile), one element per invocation and q. Plain: straight into the tiles, two
    // barriers per slice. Pipelined: the next slice goes to registers (pa / pb) while the current
    // one is multiplied, then into the other stage; one barrier per slice.
    let (na, nb) = ((c.bk * c.bm) / c.wg, (c.bk * c.bn) / c.wg);
    let fetch_a = |q: u32| format!("f32(W[wbase + (k0 + (li + {q}u * WG) / BM) * mpad + (li + {q}u * WG) % BM])");
    let fetch_b = |q: u32| format!("gather(k0 + brow + {q}u * (WG / BN), K, pok, iy0, ix0, xb0, in_h, in_w, padv)");
    // Pipelined: the registers to stage `st` (the first slice and, after each multiply, the next).
    let mut stash = String::new();
    if c.pipelined {
        let mut fetch = String::new();
        for q in 0..na {
            s.push_str(&format!("    var pa{q} = TT(0.0);\n"));
            fetch.push_str(&format!("            {{ let v = {}; pa{q} = {to_tile}; }}\n", fetch_a(q)));
            stash.push_str(&format!("            As[st * BK * BM + li + {q}u * WG] = pa{q};\n"));
        }
        for q in 0..nb {
            s.push_str(&format!("    var pb{q} = TT(0.0);\n"));
            fetch.push_str(&format!("            {{ let v = {}; pb{q} = {to_tile}; }}\n", fetch_b(q)));
            stash.push_str(&format!("            Bs[st * BK * BN + li + {q}u * WG] = pb{q};\n"));
        }
        s.push_str(&format!(
            "    let steps = kpad / BK;\n    {{\n        let k0 = 0u;\n        let st = 0u;\n{fetch}{stash}    }}\n    workgroupBarrier();\n    for (var t = 0u; t < steps; t++) {{\n        let more = t + 1u < steps;\n        if (more) {{\n            let k0 = (t + 1u) * BK;\n{fetch}        }}\n        let ab = (t % 2u) * BK * BM;\n        let bb = (t % 2u) * BK * BN;\n        for (var kk = 0u; kk < BK; kk += F) {{\n"
        ));
    } else {
        let mut stage = String::new();
        for q in 0..na {
            stage.push_str(&format!("        {{ let v = {}; As[li + {q}u * WG] = {to_tile}; }}\n", fetch_a(q)));
        }
        for q in 0..nb {
            stage.push_str(&format!("        {{ let v = {}; Bs[li + {q}u * WG] = {to_tile}; }}\n", fetch_b(q)));
        }
        s.push_str(&format!(
            "    for (var k0 = 0u; k0 < kpad; k0 += BK) {{\n{stage}        workgroupBarrier();\n        let ab = 0u;\n        let bb = 0u;\n        for (var kk = 0u; kk < BK; kk += F) {{\n"
        ));
    }
    for r in 0..r_tiles {
        s.push_str("            {\n");
        // Fragment loads: A column-major from As (stride BM), B row-major from Bs (stride BN).
        for i in 0..c.wm {
            let off = format!("ab + kk * BM + wmo{r} + {i}u * F");
            if coop {
                s.push_str(&format!("                let a{i} = coopLoad<coop_mat{f}x{f}<f16, A>>(&As[{off}], BM);\n"));
            } else {
                s.push_str(&format!("                let a{i} = {off};\n"));
            }
        }
        for j in 0..c.wn {
            let off = format!("bb + kk * BN + wno{r} + {j}u * F");
            if coop {
                s.push_str(&format!("                let b{j} = coopLoadT<coop_mat{f}x{f}<f16, B>>(&Bs[{off}], BN);\n"));
            } else {
                s.push_str(&format!("                let b{j} = {off};\n"));
            }
        }
        for i in 0..c.wm {
            for j in 0..c.wn {
                if coop {
                    s.push_str(&format!("                c{r}_{i}_{j} = coopMultiplyAdd(a{i}, b{j}, c{r}_{i}_{j});\n"));
                } else {
                    // Element (row, col) of the F x F product: lane-owned elements
                    // e = lane + u * SG, row = e / F, col = e % F.
                    s.push_str("                for (var x = 0u; x < F; x++) {\n");
                    for u in 0..per_lane {
                        s.push_str(&format!(
                            "                    {{ let e = lane + {u}u * {sg}u; c{r}_{i}_{j}_{u} = fma(f32(As[a{i} + x * BM + e / F]), f32(Bs[b{j} + x * BN + e % F]), c{r}_{i}_{j}_{u}); }}\n"
                        ));
                    }
                    s.push_str("                }\n");
                }
            }
        }
        s.push_str("            }\n");
    }
    if c.pipelined {
        s.push_str(&format!("        }}\n        if (more) {{\n            let st = (t + 1u) % 2u;\n{stash}        }}\n        workgroupBarrier();\n    }}\n"));
    } else {
        s.push_str("        }\n        workgroupBarrier();\n    }\n");
    }
    // Fragments to Cs, row-major (stride BN).
    for r in 0..r_tiles {
        s.push_str("    {\n");
        for i in 0..c.wm {
            for j in 0..c.wn {
                let off = format!("cso{r} + {i}u * F * BN + {j}u * F");
                if coop {
                    s.push_str(&format!("        coopStoreT(c{r}_{i}_{j}, &Cs[{off}], BN);\n"));
                } else {
                    for u in 0..per_lane {
                        s.push_str(&format!(
                            "        {{ let e = lane + {u}u * {sg}u; Cs[{off} + (e / F) * BN + e % F] = c{r}_{i}_{j}_{u}; }}\n"
                        ));
                    }
                }
            }
        }
        s.push_str("    }\n");
    }
    s.push_str(
        r#"    workgroupBarrier();
    for (var e = li; e < BM * BN; e += WG) {
        let m = m0 + e / BN;
        let p = n0 + e % BN;
        if (m < mg && p < npix) {
            let oc = g * mg + m;
            let o = oc * npix + p;
            Y[o] = T(epi(Cs[e], oc, o));
        }
    }
}
"#,
    );
    s
}

/// Record `call` on the MMA kernel with tile `cfg` in `mode`; the weights were packed to
/// `mpad` x `kpad` (the FMA GEMM's layout and parameters).
pub(crate) fn record(ctx: &mut DevCtx, rec: &mut Rec, call: ConvCall, cfg: MmaCfg, mode: MmaMode, mpad: usize, kpad: usize) -> Result<()> {
    let p = gemm_words(&call, mpad, kpad);
    let pipe = pipeline(ctx, rec, &format!("conv_mma:{cfg:?}:{mode:?}"), |f16| conv_mma(f16, cfg, mode))?;
    dispatch_gemm(rec, pipe, call, &p, cfg.bm, cfg.bn)
}
