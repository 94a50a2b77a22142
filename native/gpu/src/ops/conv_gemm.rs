//! The FMA implicit-GEMM convolution (GPUs without a tensor-core path: DX12, older GPUs):
//! C[M = out channels][N = pixels] = A[M][K] x B[K][N], K = in_c * kh * kw per group
//! (workgroup z), tiled through workgroup memory, register-tiled TM x 4 outputs per thread,
//! fused bias + activation + PReLU + residual. Its parameters, gather table, prologue and
//! weight layout are shared with the MMA kernel (`mma.rs`).

use super::conv::{conv_common, dispatch_tiles, ConvCall, ConvParams};
use super::{header, params, pipeline, Words};
use crate::rec::Rec;
use crate::DevCtx;
use lucent_core::error::Result;
use lucent_core::ncnn::Conv;

/// Tile configuration of the implicit-GEMM convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConvCfg {
    /// Output channels per workgroup tile.
    pub bm: u32,
    /// Output pixels per workgroup tile.
    pub bn: u32,
    /// K (in_ch * kh * kw) slice staged through workgroup memory per step.
    pub bk: u32,
    /// Output channels per thread (each thread computes tm x 4 outputs).
    pub tm: u32,
    /// The pipelined form (`conv_gemm` documents both): vec4 workgroup tiles read as vectors and
    /// double-buffered K slices, one barrier per step. Needs tm % 4 == 0.
    pub pipelined: bool,
}

impl ConvCfg {
    pub const TN: u32 = 4;
    /// A plain (not pipelined) configuration.
    pub const fn new(bm: u32, bn: u32, bk: u32, tm: u32) -> ConvCfg {
        ConvCfg { bm, bn, bk, tm, pipelined: false }
    }
    /// The same tile, pipelined.
    pub const fn pipelined(self) -> ConvCfg {
        ConvCfg { pipelined: true, ..self }
    }
    pub fn threads(&self) -> u32 {
        (self.bm / self.tm) * (self.bn / Self::TN)
    }
    pub fn shared_bytes(&self, acc16: bool) -> u32 {
        (self.bk * self.bm + self.bk * self.bn) * if acc16 { 2 } else { 4 } * if self.pipelined { 2 } else { 1 }
    }
    /// Valid and within the device's limits (workgroup size and workgroup memory).
    pub fn fits_device(&self, limits: &wgpu::Limits, acc16: bool) -> bool {
        let threads = limits.max_compute_invocations_per_workgroup.min(limits.max_compute_workgroup_size_x);
        self.valid() && self.threads() <= threads && self.shared_bytes(acc16) <= limits.max_compute_workgroup_storage_size
    }
    pub fn valid(&self) -> bool {
        let t = self.threads();
        t > 0
            && self.bm.is_multiple_of(self.tm)
            && self.bn.is_multiple_of(Self::TN)
            && (self.pipelined || (self.bk * self.bm).is_multiple_of(t))
            && (!self.pipelined || self.tm.is_multiple_of(4))
            && (self.bk * self.bn).is_multiple_of(t)
            && t.is_multiple_of(self.bn)
    }
}

params! {
    /// The implicit GEMMs' parameters (FMA and MMA), followed by the gather table
    /// ([`gather_table`]).
    pub(crate) struct GemmParams {
        /// In `lead`: input channels per group.
        pub conv: ConvParams,
        /// The weights' padded M (outputs per group, to whole BM tiles).
        pub mpad: u32,
        /// K = in_c * kh * kw per group.
        pub k: u32,
        /// K padded to whole BK slices.
        pub kpad: u32,
    }
}

/// The words of a GEMM dispatch: the parameters, then the gather table.
pub(crate) fn gemm_words(call: &ConvCall, mpad: usize, kpad: usize) -> Vec<u32> {
    let c = call.c;
    let ipg = c.in_per_group();
    let mut p = GemmParams { conv: call.params, mpad: mpad as u32, k: (ipg * c.kernel_h * c.kernel_w) as u32, kpad: kpad as u32 }.words();
    p.extend(gather_table(ipg, c.kernel_h, c.kernel_w, c.dilation_h, c.dilation_w, call.input.h, call.input.w));
    p
}

/// The weights in the GEMMs' layout, [group][kpad][mpad], zero padded to whole `bm` x `bk` tiles:
/// (weights, mpad, kpad). `c.weight` is ncnn's [out][in/group][kh][kw].
pub(crate) fn pack_weights(c: &Conv, bm: u32, bk: u32) -> (Vec<f32>, usize, usize) {
    let mg = c.out_per_group();
    let k = c.in_per_group() * c.kernel_h * c.kernel_w;
    let mpad = mg.div_ceil(bm as usize) * bm as usize;
    let kpad = k.div_ceil(bk as usize) * bk as usize;
    let mut w = vec![0.0f32; c.group * kpad * mpad];
    for g in 0..c.group {
        for m in 0..mg {
            let src = &c.weight[(g * mg + m) * k..(g * mg + m + 1) * k];
            for (kk, &v) in src.iter().enumerate() {
                w[(g * kpad + kk) * mpad + m] = v;
            }
        }
    }
    (w, mpad, kpad)
}

/// Record `call` on the FMA GEMM with tile `cfg` (f16 accumulation with `acc16`); the weights
/// were packed to `mpad` x `kpad`.
pub(crate) fn record(ctx: &mut DevCtx, rec: &mut Rec, call: ConvCall, cfg: ConvCfg, acc16: bool, mpad: usize, kpad: usize) -> Result<()> {
    let p = gemm_words(&call, mpad, kpad);
    let pipe = pipeline(ctx, rec, &format!("conv:{cfg:?}:{acc16}"), |f16| conv_gemm(f16, acc16, cfg))?;
    dispatch_gemm(rec, pipe, call, &p, cfg.bm, cfg.bn)
}

/// Record a GEMM (FMA or MMA) of `bm` x `bn` tiles.
pub(crate) fn dispatch_gemm(rec: &mut Rec, pipe: wgpu::ComputePipeline, call: ConvCall, p: &[u32], bm: u32, bn: u32) -> Result<()> {
    let tiles = call.c.out_per_group().div_ceil(bm as usize) * (call.output.h * call.output.w).div_ceil(bn as usize);
    dispatch_tiles(rec, pipe, call.bufs, p, tiles, call.c.group, call.lname)
}

/// The start of both implicit-GEMM convolution kernels (`conv_gemm` here, `mma::conv_mma`): the
/// parameters ([`GemmParams`]), this workgroup's tile (m0, n0) in the group `g`, and this
/// thread's fixed gather column (one output pixel, its input origin `xb0`). Expects `li`, `wid`,
/// `nwg`, `BM`, `BN`, `P`, `pf`.
pub(crate) const GEMM_PROLOGUE: &str = r#"    let in_c = P[0]; let in_h = P[1]; let in_w = P[2];
    let out_h = P[4]; let out_w = P[5];
    let kh = P[6]; let kw = P[7]; let sh = P[8]; let sw = P[9]; let dh = P[10]; let dw = P[11];
    let pt = i32(P[12]); let pl = i32(P[13]); let padv = pf(14u);
    let mg = P[21]; let mpad = P[22]; let K = P[23]; let kpad = P[24];
    let npix = out_h * out_w;
    let tiles_m = (mg + BM - 1u) / BM;
    let tiles = tiles_m * ((npix + BN - 1u) / BN);
    let t = wid.x + wid.y * nwg.x;
    if (t >= tiles) { return; }
    let g = wid.z;
    let m0 = (t % tiles_m) * BM;
    let n0 = (t / tiles_m) * BN;
    let wbase = g * kpad * mpad + m0;
    let xbase = g * in_c * in_h * in_w;
    // This thread's gather column: the same output pixel at every step (offsets from the table).
    let bcol = li % BN;
    let brow = li / BN;
    let pp = n0 + bcol;
    let pok = pp < npix;
    let poy = pp / max(out_w, 1u);
    let pox = pp - poy * out_w;
    let iy0 = i32(poy * sh) - pt;
    let ix0 = i32(pox * sw) - pl;
    let xb0 = i32(xbase) + iy0 * i32(in_w) + ix0;
"#;

/// One element of the implicit GEMM's B (the im2col gather) at K row `k` for the thread's fixed
/// output pixel (origin from `GEMM_PROLOGUE`): offsets from the gather table ([`GemmParams`]), the
/// pad value outside the image, 0 past K or past the last pixel. Shared by the FMA GEMM (both
/// forms) and the MMA kernel.
pub(crate) const GEMM_GATHER: &str = r#"
fn gather(k: u32, kmax: u32, pok: bool, iy0: i32, ix0: i32, xb0: i32, in_h: u32, in_w: u32, padv: f32) -> f32 {
    if (k >= kmax || !pok) { return 0.0; }
    let tb = 25u + 3u * k;
    let iy = iy0 + i32(P[tb]);
    let ix = ix0 + i32(P[tb + 1u]);
    if (iy >= 0 && iy < i32(in_h) && ix >= 0 && ix < i32(in_w)) {
        return f32(X[u32(xb0 + i32(P[tb + 2u]))]);
    }
    return padv;
}
"#;

/// Implicit-GEMM convolution ([`GemmParams`], then the gather table: per k, (ky * dh, kx * dw,
/// ic * in_h * in_w + ky * dh * in_w + kx * dw), so the gather has no runtime division; the host
/// computes it per run, see [`gather_table`]). Each thread gathers one fixed output pixel (WG is
/// a multiple of BN), whose input origin is computed once. Weights: [group][kpad][mpad], zero
/// padded ([`pack_weights`]).
///
/// Two forms, same parameters, bindings and weights:
/// - plain: scalar workgroup tiles; thread (tx, ty) owns channels ty + i * MT and pixels
///   tx + j * NT, so each K step reads TM + 4 scalars per thread; two barriers per K slice.
/// - pipelined (`c.pipelined`): tiles of vec4; a thread owns TM adjacent channels and 4
///   adjacent pixels, so a K step reads TM / 4 + 1 vectors; the next K slice is fetched from
///   memory into registers while the current one is multiplied, then stored into the other of
///   two tile buffers, one barrier per slice.
pub fn conv_gemm(f16: bool, acc16: bool, c: ConvCfg) -> String {
    if c.pipelined {
        return conv_gemm_pipelined(f16, acc16, c);
    }
    let mut s = gemm_head(f16, acc16, c);
    s.push_str(&format!("const MT: u32 = {}u;\n", c.bm / c.tm));
    s.push_str(
        r#"
var<workgroup> As: array<ACC, BK * BM>;
var<workgroup> Bs: array<ACC, BK * BN>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
"#,
    );
    s.push_str(GEMM_PROLOGUE);
    s.push_str(
        r#"    let tx = li % NT;
    let ty = li / NT;
ACC_DECL
    for (var k0 = 0u; k0 < kpad; k0 += BK) {
        for (var r = 0u; r < (BK * BM) / WG; r++) {
            let e = li + r * WG;
            As[e] = ACC(W[wbase + (k0 + e / BM) * mpad + e % BM]);
        }
        for (var r = 0u; r < (BK * BN) / WG; r++) {
            Bs[li + r * WG] = ACC(gather(k0 + brow + r * (WG / BN), K, pok, iy0, ix0, xb0, in_h, in_w, padv));
        }
        workgroupBarrier();
        for (var k = 0u; k < BK; k++) {
            let bb = k * BN + tx;
            let b = vec4<ACC>(Bs[bb], Bs[bb + NT], Bs[bb + 2u * NT], Bs[bb + 3u * NT]);
ACC_FMA
        }
        workgroupBarrier();
    }
ACC_STORE
}
"#,
    );
    // Register tile unrolled by hand (no dynamically indexed private arrays: some compilers,
    // llvmpipe's among them, keep those in memory).
    let mut decl = String::new();
    let mut fmas = String::new();
    let mut store = String::new();
    for i in 0..c.tm {
        decl.push_str(&format!("    var acc{i} = vec4<ACC>();\n"));
        fmas.push_str(&format!("            acc{i} = fma(vec4<ACC>(As[k * BM + ty + {i}u * MT]), b, acc{i});\n"));
        store.push_str(&format!(
            "    {{\n        let m = m0 + ty + {i}u * MT;\n        if (m < mg) {{\n            let oc = g * mg + m;\n            for (var j = 0u; j < 4u; j++) {{\n                let p = n0 + tx + j * NT;\n                if (p < npix) {{\n                    let o = oc * npix + p;\n                    Y[o] = T(epi(f32(acc{i}[j]), oc, o));\n                }}\n            }}\n        }}\n    }}\n"
        ));
    }
    s.replace("ACC_DECL", &decl).replace("ACC_FMA", &fmas).replace("ACC_STORE", &store)
}

/// What both forms of `conv_gemm` start with: bindings, epilogue, gather, the accumulator type
/// and the tile constants.
fn gemm_head(f16: bool, acc16: bool, c: ConvCfg) -> String {
    let mut s = header(f16);
    s.push_str(&conv_common());
    s.push_str(GEMM_GATHER);
    s.push_str(&format!(
        "alias ACC = {};\nconst BM: u32 = {}u;\nconst BN: u32 = {}u;\nconst BK: u32 = {}u;\nconst TM: u32 = {}u;\nconst NT: u32 = {}u;\nconst WG: u32 = {}u;\n",
        if acc16 { "f16" } else { "f32" },
        c.bm,
        c.bn,
        c.bk,
        c.tm,
        c.bn / ConvCfg::TN,
        c.threads()
    ));
    s
}

/// The pipelined form of `conv_gemm` (see there).
fn conv_gemm_pipelined(f16: bool, acc16: bool, c: ConvCfg) -> String {
    assert!(c.valid() && c.pipelined, "conv_gemm_pipelined: invalid configuration {c:?}");
    let wg = c.threads();
    // vec4s of A per stage, and the per-thread counts of A vec4s and B scalars fetched per slice.
    let av = c.bk * c.bm / 4;
    let ar = av.div_ceil(wg);
    let br = c.bk * c.bn / wg;
    let mut s = gemm_head(f16, acc16, c);
    s.push_str(&format!("const AV: u32 = {av}u;\nconst BQ: u32 = {}u;\nconst BV: u32 = {}u;\n", c.bm / 4, c.bk * c.bn / 4));
    s.push_str(
        r#"
// Two stages each: A as [k][BM / 4] vec4 (channels), B as [k][BN / 4] vec4 (pixels).
var<workgroup> As: array<vec4<ACC>, 2u * AV>;
var<workgroup> Bs: array<vec4<ACC>, 2u * BV>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
"#,
    );
    s.push_str(GEMM_PROLOGUE);
    let mut decl = String::new();
    let mut fetch = String::new();
    let mut stash = String::new();
    let mut reads = String::new();
    let mut fmas = String::new();
    let mut store = String::new();
    for r in 0..ar {
        decl.push_str(&format!("    var pa{r} = vec4<ACC>();\n"));
        let guard = if (r + 1) * wg > av { format!("if (li + {}u < AV) ", r * wg) } else { String::new() };
        fetch.push_str(&format!(
            "        {guard}{{\n            let e = li + {}u;\n            let a = wbase + (k0 + e / BQ) * mpad + (e % BQ) * 4u;\n            pa{r} = vec4<ACC>(ACC(W[a]), ACC(W[a + 1u]), ACC(W[a + 2u]), ACC(W[a + 3u]));\n        }}\n",
            r * wg
        ));
        stash.push_str(&format!("        {guard}{{ As[st * AV + li + {}u] = pa{r}; }}\n", r * wg));
    }
    for r in 0..br {
        decl.push_str(&format!("    var pb{r} = ACC(0.0);\n"));
        fetch.push_str(&format!(
            "        pb{r} = ACC(gather(k0 + brow + {}u, K, pok, iy0, ix0, xb0, in_h, in_w, padv));\n",
            r * (wg / c.bn)
        ));
        stash.push_str(&format!("        Bs[st * BV + (brow + {}u) * NT + bq][bc] = pb{r};\n", r * (wg / c.bn)));
    }
    for q in 0..c.tm / 4 {
        reads.push_str(&format!("            let a{q} = As[ab + k * BQ + ty * (TM / 4u) + {q}u];\n"));
    }
    for i in 0..c.tm {
        decl.push_str(&format!("    var acc{i} = vec4<ACC>();\n"));
        fmas.push_str(&format!("            acc{i} = fma(vec4<ACC>(a{}[{}]), b, acc{i});\n", i / 4, i % 4));
        store.push_str(&format!(
            "    {{\n        let m = m0 + ty * TM + {i}u;\n        if (m < mg) {{\n            let oc = g * mg + m;\n            for (var j = 0u; j < 4u; j++) {{\n                let p = n0 + tx * 4u + j;\n                if (p < npix) {{\n                    let o = oc * npix + p;\n                    Y[o] = T(epi(f32(acc{i}[j]), oc, o));\n                }}\n            }}\n        }}\n    }}\n"
        ));
    }
    s.push_str(&format!(
        r#"    let tx = li % NT;
    let ty = li / NT;
    // This thread's slot in B's vec4 rows: its gather column bcol.
    let bq = bcol / 4u;
    let bc = bcol % 4u;
{decl}    let steps = kpad / BK;
    {{
        let k0 = 0u;
{fetch}    }}
    {{
        let st = 0u;
{stash}    }}
    workgroupBarrier();
    for (var t = 0u; t < steps; t++) {{
        let more = t + 1u < steps;
        if (more) {{
            let k0 = (t + 1u) * BK;
{fetch}        }}
        let ab = (t % 2u) * AV;
        let bb = (t % 2u) * BV;
        for (var k = 0u; k < BK; k++) {{
            let b = Bs[bb + k * NT + tx];
{reads}{fmas}        }}
        if (more) {{
            let st = (t + 1u) % 2u;
{stash}        }}
        workgroupBarrier();
    }}
{store}}}
"#
    ));
    s
}

/// The gather table of `conv_gemm` (after [`GemmParams`]): per k = (ic, ky, kx) of one group,
/// (ky * dh, kx * dw, ic * in_h * in_w + ky * dh * in_w + kx * dw).
pub fn gather_table(ipg: usize, kh: usize, kw: usize, dh: usize, dw: usize, in_h: usize, in_w: usize) -> Vec<u32> {
    let mut t = Vec::with_capacity(ipg * kh * kw * 3);
    for ic in 0..ipg {
        for ky in 0..kh {
            for kx in 0..kw {
                let (dy, dx) = (ky * dh, kx * dw);
                t.extend_from_slice(&[dy as u32, dx as u32, (ic * in_h * in_w + dy * in_w + dx) as u32]);
            }
        }
    }
    t
}
