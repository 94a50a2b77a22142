//! Diagnostics and test support: the list of every WGSL source the backend can compile, and
//! what each adapter offers for cooperative matrices.

use crate::choice::fma_cfg_lists;
use crate::ops::conv::{EPI_PRELU, EPI_PRELU_PER_CHANNEL, EPI_RESIDUAL};
use crate::ops::conv_gemm::{conv_gemm, ConvCfg};
use crate::ops::mma::{self, MmaMode};
use crate::ops::rb::{self, RbCfg, RbShape};
use crate::ops::{attention, copy, direct, eltwise, overlap, pool, resample, softmax, warp};
use crate::{new_instance, BACKENDS};
use std::panic::catch_unwind;

/// A kernel family without options beyond f16 storage: its name and its WGSL builder.
type Named = (&'static str, fn(bool) -> String);

/// Every WGSL source the backend can compile, with what the device needs for it:
/// (name, source, needs SHADER_F16, needs cooperative matrices + subgroups). The naga tests
/// validate and translate each one.
pub fn shader_variants() -> Vec<(String, String, bool, bool)> {
    let mut v = Vec::new();
    for f16 in [false, true] {
        let p = if f16 { "f16" } else { "f32" };
        let simple: [Named; 16] = [
            ("conv_direct", direct::conv_direct),
            ("deconv", direct::deconv),
            ("inner", direct::inner),
            ("unary", eltwise::unary),
            ("binary", eltwise::binary),
            ("pshuf", resample::pshuf),
            ("pshuf_add", resample::pshuf_add),
            ("resample", resample::resample),
            ("copy3", copy::copy3),
            ("pool", pool::pool),
            ("softmax", softmax::softmax),
            ("layer_norm", attention::layer_norm),
            ("pad_multiple", attention::pad_multiple),
            ("ca_gram", attention::ca_gram),
            ("ca_softmax", attention::ca_softmax),
            ("ca_apply", attention::ca_apply),
        ];
        for (n, g) in simple {
            v.push((format!("{n}:{p}"), g(f16), f16, false));
        }
        v.push((format!("warp:{p}"), warp::shader(f16), f16, false));
        for d in [1, 30, attention::MAX_HEAD] {
            v.push((format!("window_attention{d}:{p}"), attention::window_attention(f16, d), f16, false));
            v.push((format!("overlap_attention{d}:{p}"), overlap::overlap_attention(f16, d), f16, false));
        }
        let mut seen = std::collections::HashSet::new();
        // Every FMA tile, plain and pipelined.
        let cfgs: Vec<ConvCfg> = fma_cfg_lists().concat().into_iter().filter(|c| seen.insert(*c)).flat_map(|c| [c, c.pipelined()]).collect();
        for c in cfgs {
            for acc16 in [false, true] {
                if acc16 && !f16 {
                    continue;
                }
                let form = if c.pipelined { "pipelined" } else { "plain" };
                v.push((format!("conv_gemm:{p}:{}x{}x{}/{}:{form}:acc16={acc16}", c.bm, c.bn, c.bk, c.tm), conv_gemm(f16, acc16, c), f16, false));
            }
        }
        // The register-blocked kernel, generated per tile and per layer shape (kernel width,
        // stride, dilation, epilogue): the default tile and two odd ones over shapes that cover
        // 1x1, 3x3, strided + dilated, every epilogue flag.
        let shapes = [
            RbShape { kw: 3, sw: 1, dw: 1, act: 0, flags: EPI_PRELU | EPI_PRELU_PER_CHANNEL | EPI_RESIDUAL },
            RbShape { kw: 1, sw: 1, dw: 1, act: 4, flags: 0 },
            RbShape { kw: 5, sw: 2, dw: 2, act: 5, flags: EPI_PRELU },
            RbShape { kw: 3, sw: 2, dw: 1, act: 6, flags: EPI_RESIDUAL },
        ];
        for c in [RbCfg::DEFAULT, RbCfg { mc: 4, px: 1 }, RbCfg { mc: 12, px: 5 }] {
            for sh in shapes {
                let name = format!("conv_rb:{p}:{}x{}:k{}s{}d{}:act{}:flags{}", c.mc, c.px, sh.kw, sh.sw, sh.dw, sh.act, sh.flags);
                v.push((name, rb::conv_rb(f16, c, sh), f16, false));
            }
        }
        for frag in [16, 8] {
            let (wide, narrow) = mma::cfg_lists(frag);
            // Every tile, plain and pipelined.
            for c in wide.into_iter().chain(narrow).flat_map(|c| [c, c.pipelined()]) {
                let form = if c.pipelined { ":pipelined" } else { "" };
                let name = |m: &str| format!("conv_mma:{p}:{m}:frag{frag}:{}x{}x{}:w{}x{}:wg{}{form}", c.bm, c.bn, c.bk, c.wm, c.wn, c.wg);
                for sg_max in [32, 64] {
                    v.push((name(&format!("coop-sg{sg_max}")), mma::conv_mma(f16, c, MmaMode::Coop { sg_max }), true, true));
                }
                for (sg, tiles16) in [(32, true), (64, true), (32, false)] {
                    let mode = MmaMode::Emulated { sg, f16_tiles: tiles16 };
                    if c.fits(mode) {
                        v.push((name(&format!("emu-sg{sg}-t{}", if tiles16 { 16 } else { 32 })), mma::conv_mma(f16, c, mode), f16 || tiles16, false));
                    }
                }
            }
        }
    }
    v
}

/// Cooperative-matrix support of every adapter wgpu sees: (name, has the experimental feature,
/// has SUBGROUP, the listed configurations as "MxNxK ab->cr"). For diagnostics.
pub fn probe_coop() -> Vec<(String, bool, bool, Vec<String>)> {
    let r = catch_unwind(|| {
        let inst = new_instance();
        pollster::block_on(inst.enumerate_adapters(BACKENDS))
            .into_iter()
            .map(|a| {
                let i = a.get_info();
                let f = a.features();
                let props = a
                    .cooperative_matrix_properties()
                    .iter()
                    .map(|p| format!("{}x{}x{} {:?}->{:?}", p.m_size, p.n_size, p.k_size, p.ab_type, p.cr_type))
                    .collect();
                (
                    format!("{} ({:?})", i.name, i.backend),
                    f.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX),
                    f.contains(wgpu::Features::SUBGROUP),
                    props,
                )
            })
            .collect::<Vec<_>>()
    });
    r.unwrap_or_default()
}

