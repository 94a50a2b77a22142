//! Tiled execution of image-to-image networks (Real-ESRGAN style).
//!
//! The image is conceptually padded ONCE with the model's own border padding (reflect or replicate,
//! `pad` px per side); tiles of `tile` x `tile` input pixels are then cut from that padded image
//! with `margin` px of context on every side (clipped to the padded image, so a tile at the image
//! border sees exactly the model's padding and nothing else, as an untiled run would). Each tile
//! runs through the network and only the centre (the tile's own core) is pasted into the output,
//! which is written straight into the 8/16-bit destination. An optional integer box (area)
//! downscale `down` is applied to each tile's core on the way out. Nothing full-size is held in
//! float: memory is bounded by the tile size.
//!
//! [`SrSpec`] is one network's tiled run minus the tile side (which the runtime picks per backend):
//! every pipeline builds its specs here, the one way, from the catalog's pre/post facts.

use crate::catalog::{self, ModelInfo, PadMode, Pipeline, PrePost};
use crate::raster::{RasterMut, RasterRef};
use lucent_core::{Cancel, Code, Error, Prepared, Result, Tensor};

/// Everything a tiled run of one network needs except the tile side: the network, its scale and
/// border padding (catalog pre/post facts), the output scale and the per-tile context margin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrSpec {
    pub stem: String,
    pub net_scale: usize,
    /// Final scale (net_scale / down).
    pub scale: usize,
    pub pad: usize,
    pub pad_mode: PadMode,
    pub margin: usize,
}

impl SrSpec {
    /// Network `stem` (with pre/post facts `pp`) run at output `scale` (a divisor of its own) with
    /// `margin` px of context per tile side (at least its padding). The one constructor.
    pub fn with_prepost(stem: &str, pp: PrePost, scale: usize, margin: usize) -> Result<SrSpec> {
        if scale == 0 || !pp.net_scale.is_multiple_of(scale) {
            return Err(Error::new(Code::Internal, format!("{stem}: scale {scale} does not divide its net scale {}", pp.net_scale)));
        }
        Ok(SrSpec { stem: stem.to_string(), net_scale: pp.net_scale, scale, pad: pp.pad, pad_mode: pp.pad_mode, margin: margin.max(pp.pad) })
    }

    /// A catalog network (its pre/post facts from [`catalog::prepost`]).
    pub fn new(stem: &str, scale: usize, margin: usize) -> Result<SrSpec> {
        let pp = catalog::prepost(stem).ok_or_else(|| Error::new(Code::Internal, format!("no pre/post facts for {stem}")))?;
        SrSpec::with_prepost(stem, pp, scale, margin)
    }

    /// The spec of a plain tiled-SR catalog model (its network, scale and tile margin).
    pub fn for_model(m: &ModelInfo) -> Result<SrSpec> {
        if m.pipeline != Pipeline::TiledSr {
            return Err(Error::new(Code::UnknownModel, format!("model '{}' has no runnable pipeline", m.name)));
        }
        let stem = m.networks.first().ok_or_else(|| Error::new(Code::Internal, "model without network"))?;
        SrSpec::new(stem, m.scale, m.tile_margin)
    }

    /// The tile plan for core tiles of `tile` input px.
    pub fn plan(&self, tile: usize) -> TilePlan {
        TilePlan {
            net_scale: self.net_scale,
            down: self.net_scale / self.scale.max(1),
            pad: self.pad,
            pad_mode: self.pad_mode,
            margin: self.margin,
            tile,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TilePlan {
    /// Network scale (output side / input side).
    pub net_scale: usize,
    /// Integer area-average downscale applied after the network (1 = none). Must divide net_scale.
    pub down: usize,
    /// The model's border padding (input px per side) and its mode.
    pub pad: usize,
    pub pad_mode: PadMode,
    /// Context margin per tile side (input px); raised to `pad` when smaller.
    pub margin: usize,
    /// Core tile side (input px, before margins).
    pub tile: usize,
}

impl TilePlan {
    pub fn out_scale_ok(&self) -> bool {
        self.down >= 1 && self.net_scale >= 1 && self.net_scale.is_multiple_of(self.down)
    }
    /// Number of tiles for a w x h image.
    pub fn tile_count(&self, w: usize, h: usize) -> usize {
        let t = self.tile.max(1);
        w.div_ceil(t) * h.div_ceil(t)
    }
}

/// Map a coordinate of the padded axis (may be negative / past the end of the image) to an image
/// coordinate.
#[inline]
pub fn border_index(i: isize, n: usize, mode: PadMode) -> usize {
    if n <= 1 {
        return 0;
    }
    match mode {
        PadMode::Replicate => i.clamp(0, n as isize - 1) as usize,
        PadMode::Reflect => {
            let period = 2 * (n as isize - 1);
            let m = i.rem_euclid(period);
            if m >= n as isize { (period - m) as usize } else { m as usize }
        }
    }
}

/// Per-tile pre/post steps around the network for nets whose input or output is not plain RGB
/// (extra constant maps, space-to-depth, ...) or that need a per-tile post step with context.
/// Both steps see the WHOLE tile region (core + margins), so any step whose reach is below the
/// margin keeps tiled == untiled.
pub trait TileAdapter {
    /// Network input from the 3 x rh x rw RGB tile (0..1).
    fn input(&self, rgb: Tensor) -> Result<Tensor> {
        Ok(rgb)
    }
    /// 3 x (rh * net_scale) x (rw * net_scale) RGB from the network output, for a tile of rw x rh.
    fn output(&self, out: Tensor, _rw: usize, _rh: usize) -> Result<Tensor> {
        Ok(out)
    }
    /// The core tile side to use when the runtime offers `side` (e.g. an even one for
    /// space-to-depth inputs).
    fn tile_side(&self, side: usize) -> usize {
        side
    }
}

/// The network takes and gives RGB.
pub struct PlainRgb;
impl TileAdapter for PlainRgb {}

/// Run `prep` over `src` tile by tile, writing the colour channels of `dst` (alpha is left alone;
/// see [`crate::resample`]). `dst` must be `src * net_scale / down` in both sides.
/// `progress(done, total)` is called after each tile.
#[allow(clippy::too_many_arguments)]
pub fn run_tiled(
    prep: &dyn Prepared,
    in_blob: usize,
    out_blob: usize,
    src: RasterRef<'_>,
    dst: &mut RasterMut<'_>,
    plan: &TilePlan,
    cancel: &Cancel,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<()> {
    run_tiled_with(prep, in_blob, out_blob, src, dst, plan, &PlainRgb, cancel, progress)
}

/// [`run_tiled`] with a [`TileAdapter`] around the network.
#[allow(clippy::too_many_arguments)]
pub fn run_tiled_with(
    prep: &dyn Prepared,
    in_blob: usize,
    out_blob: usize,
    src: RasterRef<'_>,
    dst: &mut RasterMut<'_>,
    plan: &TilePlan,
    adapter: &dyn TileAdapter,
    cancel: &Cancel,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<()> {
    if !plan.out_scale_ok() {
        return Err(Error::new(Code::Internal, format!("bad tile plan {plan:?}")));
    }
    let (w, h) = (src.width, src.height);
    let s = plan.net_scale;
    let d = plan.down;
    let os = s / d;
    if w == 0 || h == 0 {
        return Err(Error::new(Code::InvalidArgument, "empty image"));
    }
    if dst.width != w * os || dst.height != h * os {
        return Err(Error::new(
            Code::Internal,
            format!("destination {}x{} is not {}x{} x{}", dst.width, dst.height, w, h, os),
        ));
    }
    let p = plan.pad;
    let m = plan.margin.max(p);
    let t = plan.tile.max(1);
    let (pw, ph) = (w + 2 * p, h + 2 * p);
    let total = plan.tile_count(w, h);
    let mut done = 0usize;
    let inv_area = 1.0 / (d * d) as f32;

    for cy0 in (0..h).step_by(t) {
        let cy1 = (cy0 + t).min(h);
        for cx0 in (0..w).step_by(t) {
            cancel.check()?;
            let cx1 = (cx0 + t).min(w);
            // Input region in padded coordinates.
            let rx0 = (cx0 + p).saturating_sub(m);
            let ry0 = (cy0 + p).saturating_sub(m);
            let rx1 = (cx1 + p + m).min(pw);
            let ry1 = (cy1 + p + m).min(ph);
            let (rw, rh) = (rx1 - rx0, ry1 - ry0);

            let mut input = Tensor::zeros(3, rh, rw);
            let plane = rw * rh;
            let xs: Vec<usize> =
                (rx0..rx1).map(|px| border_index(px as isize - p as isize, w, plan.pad_mode)).collect();
            for ty in 0..rh {
                let sy = border_index((ry0 + ty) as isize - p as isize, h, plan.pad_mode);
                let row = ty * rw;
                for (tx, &sx) in xs.iter().enumerate() {
                    let c = src.rgb(sx, sy);
                    input.data[row + tx] = c[0];
                    input.data[plane + row + tx] = c[1];
                    input.data[2 * plane + row + tx] = c[2];
                }
            }

            let input = adapter.input(input)?;
            let mut outs = prep.run(&[(in_blob, &input)], &[out_blob], cancel)?;
            drop(input);
            let out = outs.pop().ok_or_else(|| Error::new(Code::Internal, "network returned no output"))?;
            let out = adapter.output(out, rw, rh)?;
            if out.c != 3 || out.w != rw * s || out.h != rh * s {
                return Err(Error::new(
                    Code::ModelInvalid,
                    format!("network output {} for a {}x{} tile is not 3 x ({}x{})", out.shape_string(), rw, rh, rw * s, rh * s),
                ));
            }
            let oplane = out.w * out.h;
            // Top-left of the core inside the tile output.
            let ox = (cx0 + p - rx0) * s;
            let oy = (cy0 + p - ry0) * s;
            let (dx0, dy0) = (cx0 * os, cy0 * os);
            let (dw, dh) = ((cx1 - cx0) * os, (cy1 - cy0) * os);
            for j in 0..dh {
                for i in 0..dw {
                    let mut acc = [0f32; 3];
                    for by in 0..d {
                        let base = (oy + j * d + by) * out.w + ox + i * d;
                        for bx in 0..d {
                            let k = base + bx;
                            // Clamp each network pixel before averaging (the nets overshoot 0..1).
                            acc[0] += out.data[k].clamp(0.0, 1.0);
                            acc[1] += out.data[oplane + k].clamp(0.0, 1.0);
                            acc[2] += out.data[2 * oplane + k].clamp(0.0, 1.0);
                        }
                    }
                    if d > 1 {
                        acc.iter_mut().for_each(|a| *a *= inv_area);
                    }
                    dst.set_rgb(dx0 + i, dy0 + j, acc);
                }
            }
            done += 1;
            progress(done, total);
        }
    }
    Ok(())
}
