//! Register-blocked direct convolution: the convolution kernel for CPU Vulkan adapters
//! (lavapipe/llvmpipe), where the workgroup-memory GEMM's barriers and shared-memory reads cost
//! more than they save. On llvmpipe each invocation is one SIMD lane; a storage-buffer read inside
//! a loop becomes a scalar loop over the lanes, one per component read, so what counts is how many
//! components a thread reads per multiply-add. Each thread computes `PX` horizontally adjacent
//! output pixels times `MC` output channels in registers, with no workgroup memory and no barrier:
//! - per input row (ic, ky) it reads each input column its `PX` outputs need once (the sliding
//!   window: PX + KW - 1 values for stride 1) and the row's `KW * MC` weights once, and does
//!   `KW * PX * MC` multiply-adds with them;
//! - with f16 storage, both are read as packed pairs (`u32` words decoded by `f16x2`), which halves
//!   the reads; the input window's start parity is per thread;
//! - out-of-image columns and rows are read clamped and replaced by the pad value with `select`,
//!   so no read sits in divergent control flow.
//!
//! The kernel is generated per (KW, SW, DW) of the layer (the window is unrolled); a network has
//! few of those. Parameters: [`RbParams`].

use super::conv::{conv_common, dispatch_tiles, ConvCall, ConvParams, EPI_PRELU, EPI_PRELU_PER_CHANNEL, EPI_RESIDUAL};
use super::{header_with, params, pipeline, Words};
use crate::rec::Rec;
use crate::DevCtx;
use lucent_core::error::Result;

/// Shape of one thread's register tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RbCfg {
    /// Output channels per thread (multiple of 4).
    pub mc: u32,
    /// Adjacent output pixels (along x) per thread.
    pub px: u32,
}

impl RbCfg {
    /// Threads per workgroup.
    pub const WG: u32 = 64;
    /// The default tile (the fastest measured on lavapipe whose kernels compile in seconds; see
    /// the README's "Running on a GPU").
    pub const DEFAULT: RbCfg = RbCfg { mc: 8, px: 16 };
    pub fn valid(&self) -> bool {
        self.mc >= 4 && self.mc.is_multiple_of(4) && self.mc <= 32 && self.px >= 1 && self.px <= 32
    }
    /// Scalars per weight row (one (ic, ky) of one output-channel block): KW * MC, padded to
    /// whole 16-byte reads (vec4 of f32, or of u32 holding 8 f16).
    pub fn row(&self, kw: u32, f16: bool) -> u32 {
        (kw * self.mc).next_multiple_of(if f16 { 8 } else { 4 })
    }
}

/// Per-layer specialisation: kernel width, horizontal stride and dilation, and the epilogue
/// (activation code and flags as in `conv.rs`'s `Epilogue`), so the generated kernel holds only
/// the epilogue this layer needs (the general one, inlined for every output of the tile, is what
/// makes a kernel slow to compile on llvmpipe).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RbShape {
    pub kw: u32,
    pub sw: u32,
    pub dw: u32,
    pub act: u32,
    pub flags: u32,
}

params! {
    /// The register-blocked kernel's parameters.
    pub(crate) struct RbParams {
        /// In `lead`: input channels per group.
        pub conv: ConvParams,
        /// Scalars per weight row ([`RbCfg::row`]).
        pub row: u32,
    }
}

/// Record `call` on this kernel with tile `cfg` (`row`: the uploaded weights' row length).
pub(crate) fn record(ctx: &mut DevCtx, rec: &mut Rec, call: ConvCall, cfg: RbCfg, row: usize) -> Result<()> {
    let c = call.c;
    let e = call.params.epi;
    let sh = RbShape { kw: c.kernel_w as u32, sw: c.stride_w as u32, dw: c.dilation_w as u32, act: e.act, flags: e.flags };
    let p = RbParams { conv: call.params, row: row as u32 }.words();
    let pipe = pipeline(ctx, rec, &format!("conv_rb:{cfg:?}:{sh:?}"), |f16| conv_rb(f16, cfg, sh))?;
    let tiles = tiles(cfg, c.out_per_group(), call.output.h, call.output.w);
    dispatch_tiles(rec, pipe, call.bufs, &p, tiles, c.group, call.lname)
}

/// The weights in this kernel's layout: [group][M block][ic * kh + ky][kx * MC + m] (rows of
/// `cfg.row(kw, f16)`, zero padded; M padded to whole blocks). `w` is ncnn's [out][in/group][kh][kw].
#[allow(clippy::too_many_arguments)] // the conv's geometry, as the WGSL reads it
pub fn pack_weights(w: &[f32], group: usize, mg: usize, ipg: usize, kh: usize, kw: usize, cfg: RbCfg, f16: bool) -> Vec<f32> {
    let mc = cfg.mc as usize;
    let tiles = mg.div_ceil(mc);
    let row = cfg.row(kw as u32, f16) as usize;
    let mut out = vec![0.0f32; group * tiles * ipg * kh * row];
    for g in 0..group {
        for m in 0..mg {
            let (mt, mm) = (m / mc, m % mc);
            for ic in 0..ipg {
                for ky in 0..kh {
                    let dst = ((g * tiles + mt) * ipg * kh + ic * kh + ky) * row;
                    for kx in 0..kw {
                        out[dst + kx * mc + mm] = w[(((g * mg + m) * ipg + ic) * kh + ky) * kw + kx];
                    }
                }
            }
        }
    }
    out
}

/// Workgroups to dispatch (before folding into x/y; z = groups) for `mg` outputs per group on an
/// `out_h` x `out_w` output.
pub fn tiles(cfg: RbCfg, mg: usize, out_h: usize, out_w: usize) -> usize {
    mg.div_ceil(cfg.mc as usize) * (out_h * out_w.div_ceil(cfg.px as usize)).div_ceil(RbCfg::WG as usize)
}

/// Two packed f16 (low half first) as f32, by integer ops: the f16 bits placed in an f32's
/// exponent and mantissa and rescaled by 2^112 (exact for normal and subnormal halves; a device
/// that flushes f32 subnormals flushes f16 subnormals, |x| < 6.1e-5, to zero; infinities and NaNs,
/// which no network value here is, come out as large finite numbers). Cheaper on llvmpipe than
/// `unpack2x16float`, and needs no capability beyond WGSL's core.
const F16X2: &str = r#"
fn f16x2(w: u32) -> vec2<f32> {
    let m = vec2<u32>(w & 0xffffu, w >> 16u);
    let b = ((m & vec2<u32>(0x7fffu)) << vec2<u32>(13u)) | ((m & vec2<u32>(0x8000u)) << vec2<u32>(16u));
    return bitcast<vec2<f32>>(b) * 5.192296858534828e33;
}
"#;

/// The WGSL source for storage `f16`/f32, tile `c` and layer shape `s`.
pub fn conv_rb(f16: bool, c: RbCfg, s: RbShape) -> String {
    let mut src = header_with(f16, f16);
    let mut common = conv_common().replace("var<storage, read> W: array<T>;", "var<storage, read> W: array<vec4<WT>>;");
    if f16 {
        common = common.replace("var<storage, read> X: array<T>;", "var<storage, read> X: array<u32>;");
    }
    src.push_str(&common.replace("WT", if f16 { "u32" } else { "f32" }));
    // VW: weight scalars per vec4 read (8 packed f16 or 4 f32); SW: the layer's horizontal stride.
    src.push_str(&format!(
        "const MC: u32 = {}u;\nconst PX: u32 = {}u;\nconst WG: u32 = {}u;\nconst VW: u32 = {}u;\nconst SW: u32 = {}u;\n",
        c.mc,
        c.px,
        RbCfg::WG,
        if f16 { 8 } else { 4 },
        s.sw
    ));
    src.push_str(F16X2);
    src.push_str(
        r#"
@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let in_c = P[0]; let in_h = P[1]; let in_w = P[2];
    let out_h = P[4]; let out_w = P[5];
    let kh = P[6]; let sh = P[8]; let dh = P[10];
    let pt = i32(P[12]); let pl = i32(P[13]); let padv = pf(14u);
    let mg = P[21]; let row = P[22];
    let npix = out_h * out_w;
    let gpr = (out_w + PX - 1u) / PX;
    let ngroups = out_h * gpr;
    let tiles_m = (mg + MC - 1u) / MC;
    let t = wid.x + wid.y * nwg.x;
    let chunk = t / tiles_m;
    if (chunk * WG >= ngroups) { return; }
    let g = wid.z;
    let m0 = (t - chunk * tiles_m) * MC;
    let live = chunk * WG + li < ngroups;
    let pg = min(chunk * WG + li, ngroups - 1u);
    let oy = pg / gpr;
    let ox0 = (pg - oy * gpr) * PX;
    let ix0 = i32(ox0 * SW) - pl;
    let wlast = i32(in_w) - 1;
    let hlast = i32(in_h) - 1;
COL_SETUP
    let xbase = g * in_c * in_h * in_w;
    let wstep = row / VW;
    var wr = (g * tiles_m + m0 / MC) * in_c * kh * wstep;
ACC_DECL
    for (var ic = 0u; ic < in_c; ic++) {
        let plane = i32(xbase + ic * in_h * in_w);
        for (var ky = 0u; ky < kh; ky++) {
            let iy = i32(oy * sh + ky * dh) - pt;
            let rowok = iy >= 0 && iy <= hlast;
            let rb = plane + clamp(iy, 0, hlast) * i32(in_w);
COL_LOADS
W_LOADS
TAPS
            wr += wstep;
        }
    }
STORE
}
"#,
    );
    // Distinct input columns the PX outputs read: offset p*SW + kx*DW from ix0.
    let mut cols: Vec<u32> = Vec::new();
    for p in 0..c.px {
        for kx in 0..s.kw {
            let o = p * s.sw + kx * s.dw;
            if !cols.contains(&o) {
                cols.push(o);
            }
        }
    }
    cols.sort_unstable();
    let maxc = *cols.last().unwrap();
    let mut setup = String::new();
    let mut loads = String::new();
    for &o in &cols {
        setup.push_str(&format!("    let cok{o} = ix0 + {o} >= 0 && ix0 + {o} <= wlast;\n"));
    }
    if f16 {
        // Element e = rb + ix0 + o lives in word (e >> 1), half (e & 1). With the window's start
        // e0 = rb + ix0 = 2 * b + par: column o is half (par + o) of the words from b on.
        loads.push_str("            let e0 = rb + ix0;\n            let par = (e0 & 1) == 1;\n            let b = (e0 - (e0 & 1)) / 2;\n");
        let words = maxc.div_ceil(2) + 1;
        for i in 0..words {
            loads.push_str(&format!("            let h{i} = f16x2(X[u32(max(b + {i}, 0))]);\n"));
        }
        let half = |k: u32| format!("h{}.{}", k / 2, if k.is_multiple_of(2) { "x" } else { "y" });
        for &o in &cols {
            loads.push_str(&format!(
                "            let x{o} = select(padv, select({}, {}, par), rowok && cok{o});\n",
                half(o),
                half(o + 1)
            ));
        }
    } else {
        for &o in &cols {
            loads.push_str(&format!(
                "            let x{o} = select(padv, X[u32(rb + clamp(ix0 + {o}, 0, wlast))], rowok && cok{o});\n"
            ));
        }
    }
    // The row's weights, j = kx * MC + m, as f32 values w_j.
    let row = c.row(s.kw, f16);
    let mut wl = String::new();
    let wname = |j: u32| -> String {
        if f16 {
            // 8 f16 per vec4<u32>: word j/2 of the row, half j%2.
            let v = j / 8;
            let comp = ["x", "y", "z", "w"][((j % 8) / 2) as usize];
            format!("u{v}{comp}.{}", if j.is_multiple_of(2) { "x" } else { "y" })
        } else {
            format!("v{}.{}", j / 4, ["x", "y", "z", "w"][(j % 4) as usize])
        }
    };
    if f16 {
        for v in 0..row / 8 {
            wl.push_str(&format!("            let u{v} = W[wr + {v}u];\n"));
            for comp in ["x", "y", "z", "w"] {
                wl.push_str(&format!("            let u{v}{comp} = f16x2(u{v}.{comp});\n"));
            }
        }
    } else {
        for v in 0..row / 4 {
            wl.push_str(&format!("            let v{v} = W[wr + {v}u];\n"));
        }
    }
    let q4 = c.mc / 4;
    let mut decl = String::new();
    let mut taps = String::new();
    let mut store = String::new();
    for p in 0..c.px {
        for q in 0..q4 {
            decl.push_str(&format!("    var a{p}_{q} = vec4<f32>();\n"));
        }
    }
    for kx in 0..s.kw {
        for q in 0..q4 {
            let j = kx * c.mc + 4 * q;
            taps.push_str(&format!(
                "            let w{kx}_{q} = vec4<f32>({}, {}, {}, {});\n",
                wname(j),
                wname(j + 1),
                wname(j + 2),
                wname(j + 3)
            ));
        }
        for p in 0..c.px {
            let o = p * s.sw + kx * s.dw;
            for q in 0..q4 {
                taps.push_str(&format!("            a{p}_{q} = fma(w{kx}_{q}, vec4<f32>(x{o}), a{p}_{q});\n"));
            }
        }
    }
    // Epilogue for this layer only (see `epi` in conv.rs for the general one): per output
    // channel its bias (and PReLU slope) once, per output the activation, slope, residual.
    let (prelu, per_ch, res) = (s.flags & EPI_PRELU != 0, s.flags & EPI_PRELU_PER_CHANNEL != 0, s.flags & EPI_RESIDUAL != 0);
    store.push_str("    let ca = pf(16u); let cb = pf(17u); let c19 = pf(19u); let c20 = pf(20u);\n");
    if !res {
        // R stays in the bind group layout (every convolution binds the same five buffers).
        store.push_str("    _ = R[0];\n");
    }
    for k in 0..c.mc {
        store.push_str(&format!("    let oc{k} = g * mg + min(m0 + {k}u, mg - 1u);\n    let bias{k} = AUX[oc{k}];\n"));
        if prelu {
            let sl = if per_ch { format!("AUX[P[3] + oc{k}]") } else { "AUX[P[3]]".to_string() };
            store.push_str(&format!("    let sl{k} = {sl};\n"));
        }
    }
    for p in 0..c.px {
        store.push_str(&format!("    if (live && ox0 + {p}u < out_w) {{\n        let op = oy * out_w + ox0 + {p}u;\n"));
        for k in 0..c.mc {
            store.push_str(&format!(
                "        if (m0 + {k}u < mg) {{\n            let o = oc{k} * npix + op;\n            var v = act(a{p}_{}[{}] + bias{k}, {}u, ca, cb);\n",
                k / 4,
                k % 4,
                s.act
            ));
            if prelu {
                store.push_str(&format!("            v = select(v, v * sl{k}, v < 0.0);\n"));
            }
            if res {
                store.push_str("            v = v * c19 + f32(R[o]) * c20;\n");
            }
            store.push_str("            Y[o] = T(v);\n        }\n");
        }
        store.push_str("    }\n");
    }
    src.replace("COL_SETUP", &setup)
        .replace("COL_LOADS", &loads)
        .replace("W_LOADS", &wl)
        .replace("ACC_DECL", &decl)
        .replace("TAPS", &taps)
        .replace("STORE", &store)
}
