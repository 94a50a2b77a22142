//! WGSL sources, generated per storage precision (`T` = f16 or f32) and, for the implicit-GEMM
//! convolution, per tile configuration. Every kernel reads its parameters from binding 0, an
//! `array<u32>` slice of the run's parameter buffer (floats are bit-cast).
//!
//! Kernels:
//! - `conv_gemm`: implicit-GEMM convolution (groups via workgroup z), tiled through workgroup
//!   memory, register-tiled TM x 4 outputs per thread, fused bias + activation + PReLU + residual.
//! - `conv_direct`: one output per thread, any group count (used for depthwise / odd groups).
//! - `deconv`: transposed convolution as a gather, same fused epilogue.
//! - `inner`: inner product (one output per thread), same epilogue.
//! - `unary`: ReLU/leaky, PReLU, sigmoid, tanh, clip, per-channel affine (BatchNorm / Scale).
//! - `binary`: BinaryOp / Eltwise with 3-D broadcasting through strides, scalar operand, coefficients.
//! - `pshuf`: PixelShuffle (modes 0 and 1).
//! - `resample`: Interp nearest / bilinear / bicubic from host-computed tap tables.
//! - `copy3`: strided 3-D box copy (Crop, Concat, Permute).
//! - `pool`: max / average pooling, global and adaptive.
//! - `softmax`: softmax along one axis, one line per thread.
//!
//! The other convolution kernels live beside their host code: `mma.rs` (cooperative matrices and
//! their emulation) and `rb.rs` (register-blocked direct convolution, the CPU adapters' default).

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
            && self.bm % self.tm == 0
            && self.bn % Self::TN == 0
            && (self.pipelined || (self.bk * self.bm) % t == 0)
            && (!self.pipelined || self.tm % 4 == 0)
            && (self.bk * self.bn) % t == 0
            && t % self.bn == 0
    }
}

/// Workgroup size of the one-element-per-thread kernels.
pub const EW: u32 = 64;

fn header(f16: bool) -> String {
    header_with(f16, f16)
}

/// Common header: storage type `T` (f16 or f32), `enable f16;` when `enable_f16` (f16 storage,
/// or f16 values elsewhere in the kernel), the parameter buffer and the activation function.
pub(crate) fn header_with(f16: bool, enable_f16: bool) -> String {
    let mut s = String::new();
    if enable_f16 {
        s.push_str("enable f16;\n");
    }
    if f16 {
        s.push_str("alias T = f16;\n");
    } else {
        s.push_str("alias T = f32;\n");
    }
    s.push_str(
        r#"
@group(0) @binding(0) var<storage, read> P: array<u32>;
fn pf(i: u32) -> f32 { return bitcast<f32>(P[i]); }
fn act(v: f32, t: u32, a: f32, b: f32) -> f32 {
    switch t {
        case 1u: { return max(v, 0.0); }
        case 2u: { return select(v, v * a, v < 0.0); }
        case 3u: { return min(max(v, a), b); }
        case 4u: { return 1.0 / (1.0 + exp(-v)); }
        case 5u: { let sp = select(log(1.0 + exp(v)), v, v > 20.0); return v * tanh(min(sp, 20.0)); }
        case 6u: {
            let lo = -b / a;
            let hi = 1.0 / a + lo;
            if (v < lo) { return 0.0; }
            if (v > hi) { return v; }
            return v * (v * a + b);
        }
        default: { return v; }
    }
}
"#,
    );
    s
}

/// Epilogue flags (param 18) of the convolution kernels.
pub(crate) const EPI_PRELU: u32 = 2;
pub(crate) const EPI_PRELU_PER_CHANNEL: u32 = 4;
pub(crate) const EPI_RESIDUAL: u32 = 8;

/// Shared bindings and epilogue of the convolution-like kernels: X input, W weights, AUX f32
/// [bias(out_c) | slopes], R residual, Y output. Params 3 out_c, 15 act, 16/17 act params,
/// 18 flags (2 = PReLU, 4 = per-channel slopes, 8 = residual), 19/20 residual coefficients
/// (y = y * c19 + r * c20).
const CONV_COMMON: &str = r#"
@group(0) @binding(1) var<storage, read> X: array<T>;
@group(0) @binding(2) var<storage, read> W: array<T>;
@group(0) @binding(3) var<storage, read> AUX: array<f32>;
@group(0) @binding(4) var<storage, read> R: array<T>;
@group(0) @binding(5) var<storage, read_write> Y: array<T>;
fn epi(acc: f32, oc: u32, o: u32) -> f32 {
    let flags = P[18];
    var v = act(acc + AUX[oc], P[15], pf(16u), pf(17u));
    if ((flags & 2u) != 0u) {
        let s = select(AUX[P[3]], AUX[P[3] + oc], (flags & 4u) != 0u);
        v = select(v, v * s, v < 0.0);
    }
    if ((flags & 8u) != 0u) {
        v = v * pf(19u) + f32(R[o]) * pf(20u);
    }
    return v;
}
"#;

/// The bindings and epilogue shared by the convolution kernels (also the MMA kernel's).
pub(crate) fn conv_common() -> String {
    CONV_COMMON.to_string()
}

const EW_MAIN: &str = r#"
@compute @workgroup_size(EWu)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * EWu;
    if (i >= P[0]) { return; }
"#;

fn ew_main() -> String {
    EW_MAIN.replace("EW", &EW.to_string())
}

/// The start of both implicit-GEMM convolution kernels (`conv_gemm` here, `mma::conv_mma`): the
/// params, this workgroup's tile (m0, n0) in the group `g`, and this thread's fixed gather column
/// (one output pixel, its input origin `xb0`). Expects `li`, `wid`, `nwg`, `BM`, `BN`, `P`, `pf`.
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
/// output pixel (origin from `GEMM_PROLOGUE`): offsets from the gather table (params from 25), the
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

/// Implicit-GEMM convolution. Params: 0 in_c (per group), 1 in_h, 2 in_w, 3 out_c, 4 out_h,
/// 5 out_w, 6 kh, 7 kw, 8 sh, 9 sw, 10 dh, 11 dw, 12 pad_top, 13 pad_left, 14 pad value,
/// 15..20 epilogue, 21 out per group, 22 mpad (weights' padded M), 23 K, 24 kpad, and from 25
/// the gather table: per k, (ky * dh, kx * dw, ic * in_h * in_w + ky * dh * in_w + kx * dw), so
/// the gather has no runtime division (the host computes it per run; see `gather_table`).
/// Each thread gathers one fixed output pixel (WG is a multiple of BN), whose input origin is
/// computed once. Weights: [group][kpad][mpad], zero padded.
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
    s.push_str(CONV_COMMON);
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

/// The gather table of `conv_gemm` (params from 25): per k = (ic, ky, kx) of one group,
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

/// Direct convolution, one output per thread. Params as conv_gemm, plus 0 = total outputs
/// (overrides in_c), 22 in_c per group. Weights in ncnn layout [out][in/group][kh][kw].
pub fn conv_direct(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(CONV_COMMON);
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let in_h = P[1]; let in_w = P[2];
    let out_h = P[4]; let out_w = P[5];
    let kh = P[6]; let kw = P[7]; let sh = P[8]; let sw = P[9]; let dh = P[10]; let dw = P[11];
    let pt = i32(P[12]); let pl = i32(P[13]); let padv = pf(14u);
    let mg = P[21]; let ipg = P[22];
    let npix = out_h * out_w;
    let oc = i / npix;
    let p = i - oc * npix;
    let oy = p / out_w;
    let ox = p - oy * out_w;
    let g = oc / mg;
    var s = 0.0;
    for (var ic = 0u; ic < ipg; ic++) {
        let xb = (g * ipg + ic) * in_h * in_w;
        let wb = ((oc * ipg + ic) * kh) * kw;
        for (var ky = 0u; ky < kh; ky++) {
            let iy = i32(oy * sh + ky * dh) - pt;
            for (var kx = 0u; kx < kw; kx++) {
                let ix = i32(ox * sw + kx * dw) - pl;
                var v = padv;
                if (iy >= 0 && iy < i32(in_h) && ix >= 0 && ix < i32(in_w)) {
                    v = f32(X[xb + u32(iy) * in_w + u32(ix)]);
                }
                s = fma(v, f32(W[wb + ky * kw + kx]), s);
            }
        }
    }
    Y[i] = T(epi(s, oc, i));
}
"#,
    );
    s
}

/// Transposed convolution (gather form). Params as conv_direct; 12/13 = the top/left cut of the
/// full output; out_h/out_w are the cut output's size.
pub fn deconv(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(CONV_COMMON);
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let in_h = P[1]; let in_w = P[2];
    let out_h = P[4]; let out_w = P[5];
    let kh = P[6]; let kw = P[7]; let sh = P[8]; let sw = P[9]; let dh = P[10]; let dw = P[11];
    let ct = P[12]; let cl = P[13];
    let mg = P[21]; let ipg = P[22];
    let npix = out_h * out_w;
    let oc = i / npix;
    let p = i - oc * npix;
    let fy = i32(p / out_w + ct);
    let fx = i32(p % out_w + cl);
    let g = oc / mg;
    var s = 0.0;
    for (var ky = 0u; ky < kh; ky++) {
        let ty = fy - i32(ky * dh);
        if (ty < 0 || (ty % i32(sh)) != 0) { continue; }
        let iy = u32(ty) / sh;
        if (iy >= in_h) { continue; }
        for (var kx = 0u; kx < kw; kx++) {
            let tx = fx - i32(kx * dw);
            if (tx < 0 || (tx % i32(sw)) != 0) { continue; }
            let ix = u32(tx) / sw;
            if (ix >= in_w) { continue; }
            for (var ic = 0u; ic < ipg; ic++) {
                let xv = f32(X[((g * ipg + ic) * in_h + iy) * in_w + ix]);
                s = fma(xv, f32(W[((oc * ipg + ic) * kh + ky) * kw + kx]), s);
            }
        }
    }
    Y[i] = T(epi(s, oc, i));
}
"#,
    );
    s
}

/// Inner product: params 0 = outputs, 1 = inputs, 3 = out_c (for epi), epilogue 15..20.
pub fn inner(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(CONV_COMMON);
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let n = P[1];
    var s = 0.0;
    for (var k = 0u; k < n; k++) {
        s = fma(f32(X[k]), f32(W[i * n + k]), s);
    }
    Y[i] = T(epi(s, i, i));
}
"#,
    );
    s
}

/// Params: 0 n, 1 plane (elements per channel), 2 op, 3 a, 4 b, 5 slope / channel count.
pub fn unary(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(
        r#"
@group(0) @binding(1) var<storage, read> X: array<T>;
@group(0) @binding(2) var<storage, read> AUX: array<f32>;
@group(0) @binding(3) var<storage, read_write> Y: array<T>;
"#,
    );
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let v = f32(X[i]);
    let ch = i / P[1];
    let a = pf(3u);
    let b = pf(4u);
    var r = v;
    switch P[2] {
        case 0u: { r = select(v, v * a, v < 0.0); }
        case 1u: { let sl = select(AUX[0], AUX[ch], P[5] > 1u); r = select(v, v * sl, v < 0.0); }
        case 2u: { r = 1.0 / (1.0 + exp(-v)); }
        case 3u: { r = tanh(clamp(v, -20.0, 20.0)); }
        case 4u: { r = min(max(v, a), b); }
        case 5u: { r = v * AUX[ch] + AUX[P[5] + ch]; }
        default: { }
    }
    Y[i] = T(r);
}
"#,
    );
    s
}

/// Params: 0 n, 1 C, 2 H, 3 W, 4..6 a strides (c, h, w), 7..9 b strides, 10 op, 11 ca, 12 cb,
/// 13 b is scalar, 14 scalar value.
pub fn binary(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(
        r#"
@group(0) @binding(1) var<storage, read> A: array<T>;
@group(0) @binding(2) var<storage, read> B: array<T>;
@group(0) @binding(3) var<storage, read_write> Y: array<T>;
"#,
    );
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let hw = P[2] * P[3];
    let c = i / hw;
    let r = i - c * hw;
    let y = r / P[3];
    let x = r - y * P[3];
    let a = f32(A[c * P[4] + y * P[5] + x * P[6]]);
    var b = pf(14u);
    if (P[13] == 0u) { b = f32(B[c * P[7] + y * P[8] + x * P[9]]); }
    var o = 0.0;
    switch P[10] {
        case 0u: { o = a * pf(11u) + b * pf(12u); }
        case 1u: { o = a - b; }
        case 2u: { o = a * b; }
        case 3u: { o = a / b; }
        case 4u: { o = max(a, b); }
        case 5u: { o = min(a, b); }
        case 6u: { o = pow(a, b); }
        case 7u: { o = b - a; }
        case 8u: { o = b / a; }
        default: { }
    }
    Y[i] = T(o);
}
"#,
    );
    s
}

/// Params: 0 n, 1 out_c, 2 out_h, 3 out_w, 4 factor, 5 mode.
pub fn pshuf(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(
        r#"
@group(0) @binding(1) var<storage, read> X: array<T>;
@group(0) @binding(2) var<storage, read_write> Y: array<T>;
"#,
    );
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let oc = P[1]; let oh = P[2]; let ow = P[3]; let f = P[4];
    let c = i / (oh * ow);
    let r = i - c * oh * ow;
    let y = r / ow;
    let x = r - y * ow;
    let sy = y % f;
    let sx = x % f;
    var ic = c * f * f + sy * f + sx;
    if (P[5] != 0u) { ic = (sy * f + sx) * oc + c; }
    let ih = oh / f;
    let iw = ow / f;
    Y[i] = X[(ic * ih + y / f) * iw + x / f];
}
"#,
    );
    s
}

/// PixelShuffle of X plus Interp of U, summed: Y = pshuf(X) + resample(U), one pass (the
/// compact SR networks' last step). Params as `resample` (for U) with 1 = output channels and
/// 7 = factor | mode << 16 of the PixelShuffle (X is [C*f*f][out_h/f][out_w/f]).
pub fn pshuf_add(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(
        r#"
@group(0) @binding(1) var<storage, read> X: array<T>;
@group(0) @binding(2) var<storage, read> U: array<T>;
@group(0) @binding(3) var<storage, read_write> Y: array<T>;
"#,
    );
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let oc = P[1]; let ih = P[2]; let iw = P[3]; let oh = P[4]; let ow = P[5]; let taps = P[6];
    let f = P[7] & 0xFFFFu;
    let c = i / (oh * ow);
    let r = i - c * oh * ow;
    let y = r / ow;
    let x = r - y * ow;
    let sy = y % f;
    let sx = x % f;
    var ic = c * f * f + sy * f + sx;
    if ((P[7] >> 16u) != 0u) { ic = (sy * f + sx) * oc + c; }
    let v = f32(X[(ic * (oh / f) + y / f) * (ow / f) + x / f]);
"#,
    );
    s.push_str(&separable_taps("U"));
    s.push_str("    Y[i] = T(v + s);\n}\n");
    s
}

/// The separable resampling sum `s` of output pixel (c, y, x) over the source array `src` (shared by
/// `resample` and `pshuf_add`): per output column and row, 4 source indices + 4 weights from param 8 on.
fn separable_taps(src: &str) -> String {
    r#"    let xt = 8u + x * 8u;
    let yt = 8u + ow * 8u + y * 8u;
    var s = 0.0;
    for (var a = 0u; a < taps; a++) {
        let row = (c * ih + P[yt + a]) * iw;
        var rs = 0.0;
        for (var b = 0u; b < taps; b++) {
            rs = fma(pf(xt + 4u + b), f32(SRC[row + P[xt + b]]), rs);
        }
        s = fma(pf(yt + 4u + a), rs, s);
    }
"#
    .replace("SRC", src)
}

/// Params: 0 n, 1 C, 2 in_h, 3 in_w, 4 out_h, 5 out_w, 6 taps; from 8: per output column 4 source
/// indices + 4 weights, then per output row the same.
pub fn resample(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(
        r#"
@group(0) @binding(1) var<storage, read> X: array<T>;
@group(0) @binding(2) var<storage, read_write> Y: array<T>;
"#,
    );
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let ih = P[2]; let iw = P[3]; let oh = P[4]; let ow = P[5]; let taps = P[6];
    let c = i / (oh * ow);
    let r = i - c * oh * ow;
    let y = r / ow;
    let x = r - y * ow;
"#,
    );
    s.push_str(&separable_taps("X"));
    s.push_str("    Y[i] = T(s);\n}\n");
    s
}

/// Params: 0 n, 1 C, 2 H, 3 W (region), 4 src offset, 5..7 src strides, 8 dst offset,
/// 9..11 dst strides.
pub fn copy3(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(
        r#"
@group(0) @binding(1) var<storage, read> X: array<T>;
@group(0) @binding(2) var<storage, read_write> Y: array<T>;
"#,
    );
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let hw = P[2] * P[3];
    let c = i / hw;
    let r = i - c * hw;
    let y = r / P[3];
    let x = r - y * P[3];
    Y[P[8] + c * P[9] + y * P[10] + x * P[11]] = X[P[4] + c * P[5] + y * P[6] + x * P[7]];
}
"#,
    );
    s
}

/// Params: 0 n, 1 C, 2 in_h, 3 in_w, 4 out_h, 5 out_w, 6 kh, 7 kw, 8 sh, 9 sw, 10 pad_top,
/// 11 pad_left, 12 kind (0 max, 1 avg), 13 count_include_pad, 14/15 bottom/right limit of the
/// area counted when excluding pads (exclusive), 16 adaptive, 17/18 its top/left (i32).
pub fn pool(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(
        r#"
@group(0) @binding(1) var<storage, read> X: array<T>;
@group(0) @binding(2) var<storage, read_write> Y: array<T>;
"#,
    );
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let ih = i32(P[2]); let iw = i32(P[3]); let oh = P[4]; let ow = P[5];
    let c = i / (oh * ow);
    let r = i - c * oh * ow;
    let oy = r / ow;
    let ox = r - oy * ow;
    var y0: i32; var y1: i32; var x0: i32; var x1: i32;
    if (P[16] != 0u) {
        y0 = i32((oy * P[2]) / oh);
        y1 = i32(((oy + 1u) * P[2] + oh - 1u) / oh);
        x0 = i32((ox * P[3]) / ow);
        x1 = i32(((ox + 1u) * P[3] + ow - 1u) / ow);
    } else {
        y0 = i32(oy * P[8]) - i32(P[10]);
        y1 = y0 + i32(P[6]);
        x0 = i32(ox * P[9]) - i32(P[11]);
        x1 = x0 + i32(P[7]);
    }
    let ya = max(y0, 0); let yb = min(y1, ih);
    let xa = max(x0, 0); let xb = min(x1, iw);
    let base = c * P[2] * P[3];
    var mx = -3.4028235e38;
    var sum = 0.0;
    for (var y = ya; y < yb; y++) {
        for (var x = xa; x < xb; x++) {
            let v = f32(X[base + u32(y) * P[3] + u32(x)]);
            mx = max(mx, v);
            sum += v;
        }
    }
    var o = mx;
    if (P[12] == 1u) {
        var cnt = f32((yb - ya) * (xb - xa));
        if (P[16] == 0u) {
            if (P[13] != 0u) {
                cnt = f32(P[6] * P[7]);
            } else {
                let cy = max(min(y1, i32(P[14])) - max(y0, i32(P[17])), 0);
                let cx = max(min(x1, i32(P[15])) - max(x0, i32(P[18])), 0);
                cnt = f32(cy * cx);
            }
        }
        o = sum / max(cnt, 1.0);
    }
    Y[i] = T(o);
}
"#,
    );
    s
}

/// Params: 0 lines, 1 len, 2 inner stride.
pub fn softmax(f16: bool) -> String {
    let mut s = header(f16);
    s.push_str(
        r#"
@group(0) @binding(1) var<storage, read> X: array<T>;
@group(0) @binding(2) var<storage, read_write> Y: array<T>;
"#,
    );
    s.push_str(&ew_main());
    s.push_str(
        r#"
    let len = P[1]; let inner = P[2];
    let base = (i / inner) * len * inner + i % inner;
    var mx = -3.4028235e38;
    for (var k = 0u; k < len; k++) { mx = max(mx, f32(X[base + k * inner])); }
    var sum = 0.0;
    for (var k = 0u; k < len; k++) { sum += exp(f32(X[base + k * inner]) - mx); }
    for (var k = 0u; k < len; k++) { Y[base + k * inner] = T(exp(f32(X[base + k * inner]) - mx) / sum); }
}
"#,
    );
    s
}
