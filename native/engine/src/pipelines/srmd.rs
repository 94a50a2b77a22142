//! SRMD / SRMDNF super-resolution (Zhang, Zuo, Zhang, CVPR 2018): the net takes the RGB image
//! plus 15 constant maps holding the PCA code of the degradation (bicubic) kernel, and for SRMD
//! (not NF) one more constant map with the noise level sigma/255. Replicate-pad 12 px (the
//! catalog's pre/post table), crop 12 * scale after: the shared tiler does both.

use crate::catalog::{ModelInfo, Pipeline};
use crate::engine::{guard, Engine};
use crate::raster::{Raster, RasterMut, RasterRef};
use crate::resample::resample_alpha;
use crate::tiling::{run_tiled_with, TileAdapter, TilePlan};
use lucent_core::{Cancel, Code, Error, Result, Tensor};

/// The bicubic kernel's PCA code (shared/models/README.md; the same for x2/x3/x4).
pub const BICUBIC_PCA: [f32; 15] = [
    -1.12360956e-08, -1.36899159e-08, 1.85637958e-02, 2.86066886e-08, 3.35292965e-02, 8.37272935e-08, -2.54424009e-07,
    -3.16234976e-02, -1.35169253e-02, -1.10466090e-08, 3.84753793e-02, 3.79465739e-08, -2.44916752e-01, -8.02213490e-01,
    -5.40549755e-01,
];

/// Appends the constant degradation maps to the RGB tile.
pub struct SrmdAdapter {
    /// Some(sigma on 0..255) for SRMD (noise map), None for SRMDNF.
    pub noise: Option<f32>,
}

impl TileAdapter for SrmdAdapter {
    fn input(&self, rgb: Tensor) -> Result<Tensor> {
        let extra = 15 + self.noise.is_some() as usize;
        let p = rgb.h * rgb.w;
        let mut data = rgb.data;
        data.reserve_exact(extra * p);
        for v in BICUBIC_PCA {
            data.extend(std::iter::repeat_n(v, p));
        }
        if let Some(s) = self.noise {
            data.extend(std::iter::repeat_n(s / 255.0, p));
        }
        Ok(Tensor::from_vec(3 + extra, rgb.h, rgb.w, data))
    }
}

impl Engine {
    /// Run an SRMD-family catalog model.
    pub fn run_srmd(&self, m: &ModelInfo, src: RasterRef<'_>, cancel: &Cancel, progress: &mut dyn FnMut(usize, usize)) -> Result<Raster> {
        guard("srmd", || {
            let mut out = Raster::new(src.width * m.scale, src.height * m.scale, src.channels, src.bit_depth())?;
            self.run_srmd_into(m, src, &mut out.as_mut(), cancel, progress)?;
            Ok(out)
        })
    }

    pub fn run_srmd_into(&self, m: &ModelInfo, src: RasterRef<'_>, dst: &mut RasterMut<'_>, cancel: &Cancel, progress: &mut dyn FnMut(usize, usize)) -> Result<()> {
        if m.pipeline != Pipeline::Srmd {
            return Err(Error::new(Code::Internal, format!("{} is not an SRMD model", m.name)));
        }
        let stem = *m.networks.first().ok_or_else(|| Error::new(Code::Internal, "model without network"))?;
        let pp = m.prepost().ok_or_else(|| Error::new(Code::Internal, format!("no pre/post facts for {stem}")))?;
        let l = self.network(stem)?;
        let noise = if stem.contains("srmdnf") { None } else { Some(0.0) };
        let plan = TilePlan {
            net_scale: pp.net_scale,
            down: pp.net_scale / m.scale,
            pad: pp.pad,
            pad_mode: pp.pad_mode,
            margin: m.tile_margin.max(pp.pad),
            tile: self.tile_for(&l.net),
        };
        run_tiled_with(l.prepared.as_ref(), l.in_blob, l.out_blob, src, dst, &plan, &SrmdAdapter { noise }, cancel, progress)?;
        resample_alpha(src, dst, cancel)
    }
}
