//! SRMD / SRMDNF super-resolution (Zhang, Zuo, Zhang, CVPR 2018): the net takes the RGB image
//! plus 15 constant maps holding the PCA code of the degradation (bicubic) kernel, and for SRMD
//! (not NF) one more constant map with the noise level sigma/255. Replicate-pad 12 px (the
//! catalog's pre/post table), crop 12 * scale after: the shared tiler does both.

use super::enhancer::Enhancer;
use crate::catalog::{ModelInfo, Pipeline};
use crate::raster::{RasterMut, RasterRef};
use crate::runtime::Runtime;
use crate::tiling::{SrSpec, TileAdapter};
use lucent_core::{Cancel, Code, Error, Result, Tensor};

/// The bicubic kernel's PCA code (shared/models/README.md; the same for x2/x3/x4).
#[allow(clippy::excessive_precision)] // the published values, digit for digit
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

/// An SRMD-family model: its network's tiled spec and the degradation maps' adapter.
pub struct Srmd {
    pub spec: SrSpec,
    pub adapter: SrmdAdapter,
}

impl Srmd {
    pub fn for_model(m: &ModelInfo) -> Result<Srmd> {
        if m.pipeline != Pipeline::Srmd {
            return Err(Error::new(Code::Internal, format!("{} is not an SRMD model", m.name)));
        }
        let stem = *m.networks.first().ok_or_else(|| Error::new(Code::Internal, "model without network"))?;
        let noise = if stem.contains("srmdnf") { None } else { Some(0.0) };
        Ok(Srmd { spec: SrSpec::new(stem, m.scale, m.tile_margin)?, adapter: SrmdAdapter { noise } })
    }
}

impl Enhancer for Srmd {
    fn scale(&self) -> usize {
        self.spec.scale
    }

    fn run_into(
        &self,
        rt: &Runtime,
        src: RasterRef<'_>,
        dst: &mut RasterMut<'_>,
        cancel: &Cancel,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<()> {
        rt.run_tiled(&self.spec, &self.adapter, src, dst, cancel, progress)
    }
}
