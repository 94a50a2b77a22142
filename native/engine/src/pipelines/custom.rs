//! An operator's own network (bring your own model): one weights file (PyTorch / safetensors,
//! built by lucent_models) or ncnn stem, run as plain tiled super-resolution at its own scale.
//! No catalog entry: the caller names the file ([`crate::photo::EnhanceOptions::network`],
//! [`crate::video::enhance_frames_with`]). Networks whose input sides must be a multiple of some
//! `m` (pixel-unshuffle, attention windows) get each tile reflect-padded to that multiple and the
//! output cropped back ([`PadToMultiple`]), as spandrel's users do for whole images.

use super::enhancer::Enhancer;
use crate::raster::{RasterMut, RasterRef};
use crate::runtime::Runtime;
use crate::tiling::{SrSpec, TileAdapter};
use lucent_core::{Cancel, Code, Error, Result, Tensor};

/// A network file run as tiled SR; see the module doc.
pub struct CustomSr {
    spec: SrSpec,
    pad: PadToMultiple,
}

impl CustomSr {
    /// Load (once per runtime) the network at `path` and infer its scale from its graph;
    /// `multiple`: the side multiple its input needs (1: any).
    pub fn open(rt: &Runtime, path: &str, multiple: usize) -> Result<CustomSr> {
        Ok(CustomSr { spec: rt.spec_for_stem(path)?, pad: PadToMultiple(multiple.max(1)) })
    }
}

impl Enhancer for CustomSr {
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
        rt.run_tiled(&self.spec, &self.pad, src, dst, cancel, progress)
    }
}

/// Reflect-pads each tile's right and bottom edges up to a multiple of `.0` and crops the
/// network's output back to the tile (exact for any network: the padding only adds context).
pub struct PadToMultiple(pub usize);

impl TileAdapter for PadToMultiple {
    fn input(&self, rgb: Tensor) -> Result<Tensor> {
        let m = self.0;
        let (c, h, w) = (rgb.c, rgb.h, rgb.w);
        let (ph, pw) = (h.div_ceil(m) * m, w.div_ceil(m) * m);
        if (ph, pw) == (h, w) {
            return Ok(rgb);
        }
        if h < 2 && ph > h || w < 2 && pw > w {
            return Err(Error::new(Code::InvalidArgument, format!("a {w}x{h} tile cannot be padded to a multiple of {m}")));
        }
        // Reflect (no edge repeat): index n + k maps to n - 2 - k, folded again for tiny sides.
        let fold = |i: usize, n: usize| -> usize {
            let period = 2 * (n - 1);
            let k = i % period;
            if k < n { k } else { period - k }
        };
        let mut out = Tensor::zeros(c, ph, pw);
        for ch in 0..c {
            for y in 0..ph {
                let sy = if h == 1 { 0 } else { fold(y, h) };
                let src = &rgb.data[(ch * h + sy) * w..(ch * h + sy + 1) * w];
                let dst = &mut out.data[(ch * ph + y) * pw..(ch * ph + y + 1) * pw];
                for (x, d) in dst.iter_mut().enumerate() {
                    *d = src[if w == 1 { 0 } else { fold(x, w) }];
                }
            }
        }
        Ok(out)
    }

    fn output(&self, out: Tensor, rw: usize, rh: usize) -> Result<Tensor> {
        let m = self.0;
        let (ph, pw) = (rh.div_ceil(m) * m, rw.div_ceil(m) * m);
        if (ph, pw) == (rh, rw) || out.h == 0 || out.w == 0 {
            return Ok(out);
        }
        // The network's scale, from the padded input it was given.
        if !out.h.is_multiple_of(ph) || out.h / ph != out.w / pw {
            return Err(Error::new(Code::ModelInvalid, format!("output {}x{} is not a whole multiple of the padded input {pw}x{ph}", out.w, out.h)));
        }
        let s = out.h / ph;
        let (oh, ow) = (rh * s, rw * s);
        let mut cropped = Tensor::zeros(out.c, oh, ow);
        for ch in 0..out.c {
            for y in 0..oh {
                let src = &out.data[(ch * out.h + y) * out.w..(ch * out.h + y) * out.w + ow];
                cropped.data[(ch * oh + y) * ow..(ch * oh + y + 1) * ow].copy_from_slice(src);
            }
        }
        Ok(cropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pads_by_reflection_and_crops_back() {
        let t = Tensor::from_vec(1, 2, 3, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let p = PadToMultiple(4).input(t).unwrap();
        assert_eq!((p.h, p.w), (4, 4));
        // rows: 0, 1, then reflected 0, 1 (period 2); columns: 0 1 2 then 1.
        assert_eq!(&p.data[0..4], &[1.0, 2.0, 3.0, 2.0]);
        assert_eq!(&p.data[4..8], &[4.0, 5.0, 6.0, 5.0]);
        assert_eq!(&p.data[8..12], &[1.0, 2.0, 3.0, 2.0]);
        // a x2 "network" output of the padded tile, cropped to the 3x2 tile at x2.
        let out = Tensor::from_vec(1, 8, 8, (0..64).map(|v| v as f32).collect());
        let c = PadToMultiple(4).output(out, 3, 2).unwrap();
        assert_eq!((c.h, c.w), (4, 6));
        assert_eq!(&c.data[0..6], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(&c.data[6..12], &[8.0, 9.0, 10.0, 11.0, 12.0, 13.0]);
        // already a multiple: untouched
        let t = Tensor::from_vec(1, 4, 4, vec![0.5; 16]);
        assert_eq!(PadToMultiple(4).input(t.clone()).unwrap().data, t.data);
    }
}
