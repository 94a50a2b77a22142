//! The plain tiled super-resolution pipeline (catalog `TiledSr`): one network run tiled with its
//! border padding, area-averaged down when the model's scale is below the network's. Its data is
//! an [`SrSpec`] (tiling.rs); the other pipelines reuse it for their base and face networks.

use super::enhancer::Enhancer;
use crate::raster::{RasterMut, RasterRef};
use crate::runtime::Runtime;
use crate::tiling::{PlainRgb, SrSpec};
use lucent_core::{Cancel, Result};

impl Enhancer for SrSpec {
    fn scale(&self) -> usize {
        self.scale
    }

    fn run_into(
        &self,
        rt: &Runtime,
        src: RasterRef<'_>,
        dst: &mut RasterMut<'_>,
        cancel: &Cancel,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<()> {
        rt.run_tiled(self, &PlainRgb, src, dst, cancel, progress)
    }
}
