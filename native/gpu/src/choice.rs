//! Which kernel each convolution runs: the static default per device and settings, the
//! candidates the tuner may time instead (`tune.rs`), and the choice a layer's weights are
//! uploaded for.
//!
//! - An MMA plan (cooperative matrices or their emulation, `Settings::mma`) runs the
//!   [`mma`](crate::ops::mma) GEMM: its forced tile, else the first of its list that fits the device.
//! - Otherwise GPUs run the FMA GEMM of [`conv_gemm`](crate::ops::conv_gemm): the forced tile (`Settings::conv`), else
//!   the first of [`fma_cfg_lists`] that fits.
//! - CPU adapters run the register-blocked kernel ([`rb`](crate::ops::rb), `Settings::rb`) unless a kernel,
//!   tile or MMA plan is forced or the tuner chose a GEMM.
//! - Layers the GEMMs do not suit (one input or fewer than 4 outputs per group: depthwise),
//!   deconvolutions and `Settings::conv_direct` run the direct kernel (one output per thread).
//!
//! Each GEMM in its handle's form (plain or pipelined, `Settings::pipelined`), where that form
//! fits.

use crate::ops::conv_gemm::ConvCfg;
use crate::ops::mma::{self, MmaCfg, MmaMode};
use crate::ops::rb::RbCfg;
use crate::Settings;
use lucent_core::ncnn::Conv;

/// The FMA kernel's tile configurations, widest first: [wide M, narrow M].
pub(crate) fn fma_cfg_lists() -> [Vec<ConvCfg>; 2] {
    let wide = vec![
        ConvCfg::new(64, 128, 16, 8),
        ConvCfg::new(64, 64, 16, 4),
        ConvCfg::new(32, 32, 16, 4),
        ConvCfg::new(16, 16, 8, 4),
    ];
    let narrow = vec![
        ConvCfg::new(16, 128, 16, 4),
        ConvCfg::new(16, 64, 16, 4),
        ConvCfg::new(16, 16, 8, 4),
    ];
    [wide, narrow]
}

/// Choose an FMA tile configuration that fits the device's limits (pipelined: the
/// pipelined form of the first tile whose double-size tiles fit).
pub(crate) fn default_fma_cfg(limits: &wgpu::Limits, small_m: bool, acc16: bool, pipelined: bool) -> ConvCfg {
    let [wide, narrow] = fma_cfg_lists();
    let list: &[ConvCfg] = if small_m { &narrow } else { &wide };
    let form = |c: &ConvCfg| if pipelined { c.pipelined() } else { *c };
    list.iter().map(form).find(|c| c.fits_device(limits, acc16)).unwrap_or(*list.last().unwrap())
}

/// An implicit-GEMM convolution kernel and its tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gemm {
    Fma(ConvCfg),
    Mma(MmaCfg, MmaMode),
}

impl Gemm {
    /// The kernel with its tile, for reports: "fma 64x128x16/8", "coop 64x64x32 w2x2",
    /// "+pipelined" appended to a pipelined form.
    pub(crate) fn label(&self) -> String {
        let (kind, tile, pipelined) = match self {
            Gemm::Fma(c) => ("fma", format!("{}x{}x{}/{}", c.bm, c.bn, c.bk, c.tm), c.pipelined),
            Gemm::Mma(c, mode) => (
                if matches!(mode, MmaMode::Coop { .. }) { "coop" } else { "mma-emulated" },
                format!("{}x{}x{} w{}x{}", c.bm, c.bn, c.bk, c.wm, c.wn),
                c.pipelined,
            ),
        };
        format!("{kind} {tile}{}", if pipelined { "+pipelined" } else { "" })
    }

    /// The kernel's name in reports ("fma", "coop", "mma-emulated", "+pipelined" appended to a
    /// pipelined form).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Gemm::Fma(c) if c.pipelined => "fma+pipelined",
            Gemm::Fma(_) => "fma",
            Gemm::Mma(c, MmaMode::Coop { .. }) if c.pipelined => "coop+pipelined",
            Gemm::Mma(_, MmaMode::Coop { .. }) => "coop",
            Gemm::Mma(c, MmaMode::Emulated { .. }) if c.pipelined => "mma-emulated+pipelined",
            Gemm::Mma(_, MmaMode::Emulated { .. }) => "mma-emulated",
        }
    }

    /// The tile's (BM, BK): the weights are padded to whole tiles of them.
    pub(crate) fn bm_bk(&self) -> (u32, u32) {
        match self {
            Gemm::Fma(c) => (c.bm, c.bk),
            Gemm::Mma(c, _) => (c.bm, c.bk),
        }
    }
}

/// The GEMM a convolution with `mg` outputs per group gets without tuning: the handle's MMA plan
/// (its forced tile, else the first of its list that fits) in the handle's form, else the FMA
/// kernel's forced or first fitting tile. Forced tiles take the handle's form where that form
/// of them is valid.
pub(crate) fn default_gemm(limits: &wgpu::Limits, mg: usize, settings: &Settings) -> Gemm {
    let pipe = settings.pipelined;
    let mma = match (settings.conv, settings.mma) {
        (None, Some(plan)) => plan
            .cfg
            .map(|c| if pipe && mma::fits_device(&c.pipelined(), limits, plan.mode) { c.pipelined() } else { c })
            .filter(|c| c.fits(plan.mode))
            .or_else(|| mma::default_cfg(limits, plan.frag, mg <= 16, plan.mode, pipe))
            .map(|c| Gemm::Mma(c, plan.mode)),
        _ => None,
    };
    let forced = settings.conv.map(|c| if pipe && c.pipelined().fits_device(limits, settings.f16_math) { c.pipelined() } else { c });
    mma.unwrap_or_else(|| Gemm::Fma(forced.unwrap_or_else(|| default_fma_cfg(limits, mg <= 16, settings.f16_math, pipe))))
}

/// Whether convolution (not deconvolution) `c` can run as an implicit GEMM with these settings:
/// the GEMMs want more than one input and at least 4 outputs per group.
pub(crate) fn gemm_shaped(c: &Conv, settings: &Settings) -> bool {
    c.in_per_group() > 1 && c.out_per_group() >= 4 && !settings.conv_direct
}

/// The kernel a convolution runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConvChoice {
    /// Implicit GEMM (FMA or MMA).
    Gemm(Gemm),
    /// The register-blocked direct kernel with this tile.
    Rb(RbCfg),
    /// One output per thread.
    Direct,
}

/// The kernel of convolution (or, with `deconv`, deconvolution) `c`: `tuned` (the tuner's pick
/// for this layer), else the default choice for these settings.
pub(crate) fn conv_choice(limits: &wgpu::Limits, c: &Conv, settings: &Settings, deconv: bool, tuned: Option<Gemm>) -> ConvChoice {
    // The register-blocked kernel takes any output count (its tile's spare channels are
    // masked); the GEMMs want at least 4 outputs per group.
    let rb_ok = !deconv && c.in_per_group() > 1 && !settings.conv_direct && settings.conv.is_none() && settings.mma.is_none();
    if let (true, Some(cfg), None) = (rb_ok, settings.rb, tuned) {
        return ConvChoice::Rb(cfg);
    }
    if !deconv && gemm_shaped(c, settings) {
        ConvChoice::Gemm(tuned.unwrap_or_else(|| default_gemm(limits, c.out_per_group(), settings)))
    } else {
        ConvChoice::Direct
    }
}

/// The GEMMs convolution `c` may run with these settings, the default first; empty where the
/// choice is not the tuner's (a forced kernel or tile, the register-blocked or direct kernel).
pub(crate) fn candidates(limits: &wgpu::Limits, c: &Conv, settings: &Settings) -> Vec<Gemm> {
    if !gemm_shaped(c, settings) || settings.conv.is_some() || settings.rb.is_some() {
        return Vec::new();
    }
    let mg = c.out_per_group();
    let small = mg <= 16;
    let mut v: Vec<Gemm> = match settings.mma {
        Some(plan) if plan.cfg.is_some() => return Vec::new(),
        Some(plan) => {
            let (wide, narrow) = mma::cfg_lists(plan.frag);
            let list = if small { narrow } else { wide };
            list.into_iter()
                .flat_map(|c| [c, c.pipelined()])
                .filter(|c| mma::fits_device(c, limits, plan.mode))
                .map(|c| Gemm::Mma(c, plan.mode))
                .collect()
        }
        None => {
            let [wide, narrow] = fma_cfg_lists();
            let list = if small { narrow } else { wide };
            list.into_iter()
                .flat_map(|c| [c, c.pipelined()])
                .filter(|c| c.fits_device(limits, settings.f16_math))
                .map(Gemm::Fma)
                .collect()
        }
    };
    // The default outside the lists (an MMA plan with no fitting tile falls back to the FMA
    // kernel; no FMA tile fits): nothing to choose from.
    let d = default_gemm(limits, mg, settings);
    if !v.contains(&d) {
        return Vec::new();
    }
    v.retain(|g| *g != d);
    v.insert(0, d);
    v
}
