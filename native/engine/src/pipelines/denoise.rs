//! 1x denoising pipelines (sharpen_denoise_1x, detail_denoise_1x).
//!
//! FFDNet (Zhang, Zuo, Zhang 2018) is non-blind: it takes the noise level as an input map. The
//! service estimates that level from the image itself ([`super::noise`]), maps the raw estimate
//! through a calibration measured on McMaster (clipped 8-bit Gaussian noise), scales it per model,
//! then runs the converted FFDNet-Clip net tiled: RGB -> space-to-depth (13 channels with the
//! sigma map) -> net -> depth-to-space. sharpen_denoise adds an unsharp mask on luma inside each
//! tile (its reach is well inside the tile margin, so tiled == untiled).
//!
//! CDnCNN-B (blind DnCNN) and realesr-general-x4v3 (x4, then 4x4 area down) are kept here as the
//! measured alternatives (`examples/denoise_eval.rs`).

use super::noise::{estimate_noise_clip_aware, NoiseEstimate};
use super::enhancer::Enhancer;
use crate::catalog::{self, DenoiseKind, ModelInfo, Pipeline};
use crate::raster::{RasterMut, RasterRef};
use crate::runtime::Runtime;
use crate::tiling::{SrSpec, TileAdapter};
use lucent_core::{Cancel, Code, Error, Result, Tensor};

pub use crate::catalog::FFDNET_CLIP;
pub const FFDNET: &str = "denoise/ffdnet_color";
pub const CDNCNN_B: &str = "denoise/cdncnn_b_color";

/// Context per tile side: FFDNet's 12 convs run at half resolution (24 px of reach) plus the
/// unsharp mask's kernel; DnCNN's 20 convs reach 20 px. Even (space-to-depth phase).
pub const DENOISE_MARGIN: usize = 32;

/// Raw clipping-aware PCA estimate -> the sigma FFDNet-Clip is told (0..255). Measured on McMaster
/// (18 images, clipped + rounded Gaussian noise): true 15 / 25 / 50 -> raw mean 15.03 / 24.67 /
/// 44.56, i.e. unbiased up to ~25 and low above (clipping eats more of the noise): identity up to
/// `CALIB_KNEE`, slope `CALIB_SLOPE` above it.
pub const CALIB_KNEE: f64 = 25.0;
pub const CALIB_SLOPE: f64 = 1.28;

/// Unsharp mask on luma: out = Y + amount * (Y - gauss(Y, radius)), added equally to R, G, B.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usm {
    pub amount: f32,
    /// Gaussian sigma in pixels (kernel reach = ceil(3 * radius)).
    pub radius: f32,
}

/// Per-model constants (measured, see docs/models.md "Quality").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DenoiseParams {
    /// Multiplier on the calibrated sigma estimate.
    pub sigma_scale: f64,
    pub usm: Option<Usm>,
}

pub fn params(kind: DenoiseKind) -> DenoiseParams {
    match kind {
        // McMaster, first 6 images, blind: sigma scale 1.0 -> 33.50 / 31.17 / 27.73 dB at sigma
        // 15 / 25 / 50; 0.9 -> 33.37 / 30.93 / 27.72 (a lower sigma keeps more grain, not more detail).
        DenoiseKind::Detail => DenoiseParams { sigma_scale: 1.0, usm: None },
        // USM amount 0.25 (radius 1 px) costs 0.65 / 0.40 dB vs detail at sigma 15 / 25; 0.5 cost
        // 2.0 / 1.27 dB (halo on the residual noise): the gentler one.
        DenoiseKind::Sharpen => DenoiseParams { sigma_scale: 1.0, usm: Some(Usm { amount: 0.25, radius: 1.0 }) },
    }
}

/// The sigma (0..255) the engine hands FFDNet for a raw estimate.
pub fn calibrated_sigma(raw: &NoiseEstimate, scale: f64) -> f32 {
    let s = raw.sigma.max(0.0);
    let s = if s > CALIB_KNEE { CALIB_KNEE + (s - CALIB_KNEE) * CALIB_SLOPE } else { s };
    (s * scale).clamp(0.0, 75.0) as f32
}

/// FFDNet's pre/post steps: space-to-depth with the sigma map, depth-to-space, optional USM.
pub struct FfdnetAdapter {
    /// Noise level on the 0..255 scale.
    pub sigma: f32,
    pub usm: Option<Usm>,
}

impl TileAdapter for FfdnetAdapter {
    fn input(&self, rgb: Tensor) -> Result<Tensor> {
        let (h, w) = (rgb.h, rgb.w);
        let (h2, w2) = (h.div_ceil(2), w.div_ceil(2));
        let mut t = Tensor::zeros(13, h2, w2);
        let p2 = h2 * w2;
        for c in 0..3 {
            for i in 0..4 {
                let (dy, dx) = (i % 2, i / 2);
                let dst = &mut t.data[(c * 4 + i) * p2..(c * 4 + i + 1) * p2];
                for y in 0..h2 {
                    // Odd sizes: the last row / column is replicated.
                    let sy = (2 * y + dy).min(h - 1);
                    let srow = &rgb.data[(c * h + sy) * w..(c * h + sy + 1) * w];
                    for x in 0..w2 {
                        dst[y * w2 + x] = srow[(2 * x + dx).min(w - 1)];
                    }
                }
            }
        }
        t.data[12 * p2..].fill(self.sigma / 255.0);
        Ok(t)
    }

    fn output(&self, out: Tensor, rw: usize, rh: usize) -> Result<Tensor> {
        let (h2, w2) = (rh.div_ceil(2), rw.div_ceil(2));
        if out.c != 12 || out.h != h2 || out.w != w2 {
            return Err(Error::new(Code::ModelInvalid, format!("FFDNet output {} for a {rw}x{rh} tile is not 12x{h2}x{w2}", out.shape_string())));
        }
        let p2 = h2 * w2;
        let mut rgb = Tensor::zeros(3, rh, rw);
        for c in 0..3 {
            for i in 0..4 {
                let (dy, dx) = (i % 2, i / 2);
                let srcp = &out.data[(c * 4 + i) * p2..(c * 4 + i + 1) * p2];
                for y in 0..h2 {
                    let oy = 2 * y + dy;
                    if oy >= rh {
                        continue;
                    }
                    for x in 0..w2 {
                        let ox = 2 * x + dx;
                        if ox < rw {
                            rgb.data[(c * rh + oy) * rw + ox] = srcp[y * w2 + x];
                        }
                    }
                }
            }
        }
        if let Some(u) = self.usm {
            unsharp_luma(&mut rgb, u);
        }
        Ok(rgb)
    }

    /// Even tiles keep every tile's space-to-depth phase equal to the whole image's.
    fn tile_side(&self, side: usize) -> usize {
        even_tile(side)
    }
}

fn even_tile(side: usize) -> usize {
    (side & !1).max(16)
}

/// CDnCNN-B with an optional unsharp mask.
pub struct DncnnAdapter {
    pub usm: Option<Usm>,
}

impl TileAdapter for DncnnAdapter {
    fn output(&self, mut out: Tensor, _rw: usize, _rh: usize) -> Result<Tensor> {
        if let Some(u) = self.usm {
            unsharp_luma(&mut out, u);
        }
        Ok(out)
    }

    fn tile_side(&self, side: usize) -> usize {
        even_tile(side)
    }
}

fn gauss_kernel(radius: f32) -> Vec<f32> {
    let r = (3.0 * radius).ceil().max(1.0) as isize;
    let mut k: Vec<f32> = (-r..=r).map(|i| (-(i * i) as f32 / (2.0 * radius * radius)).exp()).collect();
    let s: f32 = k.iter().sum();
    k.iter_mut().for_each(|v| *v /= s);
    k
}

/// Unsharp mask on BT.601 luma of a planar RGB tensor (values clamped to 0..1 first; edges
/// clamped), the luma detail added to each channel.
pub fn unsharp_luma(rgb: &mut Tensor, u: Usm) {
    let (h, w) = (rgb.h, rgb.w);
    let p = h * w;
    rgb.data.iter_mut().for_each(|v| *v = v.clamp(0.0, 1.0));
    let y: Vec<f32> = (0..p).map(|i| 0.299 * rgb.data[i] + 0.587 * rgb.data[p + i] + 0.114 * rgb.data[2 * p + i]).collect();
    let k = gauss_kernel(u.radius);
    let r = (k.len() / 2) as isize;
    let mut tmp = vec![0f32; p];
    for yy in 0..h {
        let row = &y[yy * w..(yy + 1) * w];
        for x in 0..w {
            let mut a = 0f32;
            for (j, kv) in k.iter().enumerate() {
                let sx = (x as isize + j as isize - r).clamp(0, w as isize - 1) as usize;
                a += kv * row[sx];
            }
            tmp[yy * w + x] = a;
        }
    }
    for yy in 0..h {
        for x in 0..w {
            let mut a = 0f32;
            for (j, kv) in k.iter().enumerate() {
                let sy = (yy as isize + j as isize - r).clamp(0, h as isize - 1) as usize;
                a += kv * tmp[sy * w + x];
            }
            let d = u.amount * (y[yy * w + x] - a);
            for c in 0..3 {
                rgb.data[c * p + yy * w + x] += d;
            }
        }
    }
}

/// One way to denoise (the catalog's, or an alternative measured against it).
#[derive(Debug, Clone, PartialEq)]
pub enum Method {
    /// FFDNet net stem with a fixed sigma (0..255) and optional USM.
    Ffdnet { stem: &'static str, sigma: f32, usm: Option<Usm> },
    /// CDnCNN-B (blind) with optional USM.
    Dncnn { usm: Option<Usm> },
    /// realesr-general-x4v3 x4, then 4x4 area-average back to the input size.
    GeneralX4Down,
}

impl Enhancer for Method {
    fn scale(&self) -> usize {
        1
    }

    fn run_into(
        &self,
        rt: &Runtime,
        src: RasterRef<'_>,
        dst: &mut RasterMut<'_>,
        cancel: &Cancel,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<()> {
        match self {
            Method::Ffdnet { stem, sigma, usm } => {
                let spec = SrSpec::new(stem, 1, DENOISE_MARGIN)?;
                rt.run_tiled(&spec, &FfdnetAdapter { sigma: *sigma, usm: *usm }, src, dst, cancel, progress)
            }
            Method::Dncnn { usm } => {
                let spec = SrSpec::new(CDNCNN_B, 1, DENOISE_MARGIN)?;
                rt.run_tiled(&spec, &DncnnAdapter { usm: *usm }, src, dst, cancel, progress)
            }
            Method::GeneralX4Down => SrSpec::new(catalog::GENERAL_X4V3, 1, 24)?.run_into(rt, src, dst, cancel, progress),
        }
    }
}

/// The catalog's denoise pipeline: estimate sigma from the picture, calibrate, FFDNet-Clip (+ USM).
pub struct Denoise {
    pub kind: DenoiseKind,
    /// The model's network (FFDNet-Clip, or CDnCNN-B).
    pub stem: &'static str,
}

impl Denoise {
    pub fn for_model(m: &ModelInfo) -> Result<Denoise> {
        let Pipeline::Denoise(kind) = m.pipeline else {
            return Err(Error::new(Code::Internal, format!("{} is not a denoise model", m.name)));
        };
        Ok(Denoise { kind, stem: m.networks.first().copied().unwrap_or(FFDNET_CLIP) })
    }

    /// The method this picture gets (its noise level estimated here).
    pub fn method(&self, src: RasterRef<'_>) -> Method {
        let p = params(self.kind);
        if self.stem == CDNCNN_B {
            return Method::Dncnn { usm: p.usm };
        }
        let sigma = calibrated_sigma(&estimate_noise_clip_aware(src), p.sigma_scale);
        Method::Ffdnet { stem: self.stem, sigma, usm: p.usm }
    }
}

impl Enhancer for Denoise {
    fn scale(&self) -> usize {
        1
    }

    fn run_into(
        &self,
        rt: &Runtime,
        src: RasterRef<'_>,
        dst: &mut RasterMut<'_>,
        cancel: &Cancel,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<()> {
        self.method(src).run_into(rt, src, dst, cancel, progress)
    }
}
