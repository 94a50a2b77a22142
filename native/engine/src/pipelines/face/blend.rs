//! Face regions and their feathered masks.
//!
//! For a detected box (w x h) the face network sees a square of side [`EXPAND`] x max(w, h)
//! around the box centre (clipped to the image): context for the network, and room for the mask to
//! fall off to zero before the crop's edge. The mask is an ellipse centred on the box with
//! semi-axes [`INNER`] x (w/2, h/2): 1 inside, then a raised-cosine falloff over a further
//! [`FEATHER`] of the normalised radius, 0 beyond. Since INNER x (1 + FEATHER) = 1.69 < EXPAND,
//! the mask is exactly 0 on every crop edge that lies inside the image: the face crop's own
//! border effects never reach the output, and there is no edge for a seam to form on.

use super::detect::FaceBox;
use super::image::{dst_rgb, Rgb};
use crate::raster::RasterMut;

pub const EXPAND: f32 = 1.8;
pub const INNER: f32 = 1.25;
pub const FEATHER: f32 = 0.35;

/// An axis-aligned pixel rectangle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub x0: usize,
    pub y0: usize,
    pub w: usize,
    pub h: usize,
}

impl Region {
    pub fn scaled(&self, s: usize) -> Region {
        Region { x0: self.x0 * s, y0: self.y0 * s, w: self.w * s, h: self.h * s }
    }
}

/// The crop (input pixels) the face network runs on for box `b` of a w x h image; None when the
/// box is degenerate.
pub fn face_region(b: &FaceBox, w: usize, h: usize) -> Option<Region> {
    let side = EXPAND * b.width().max(b.height());
    #[allow(clippy::neg_cmp_op_on_partial_ord)] // NaN sides are refused too
    if !(side >= 2.0) || w == 0 || h == 0 {
        return None;
    }
    let x0 = (b.cx() - 0.5 * side).floor().max(0.0) as usize;
    let y0 = (b.cy() - 0.5 * side).floor().max(0.0) as usize;
    let x1 = ((b.cx() + 0.5 * side).ceil().max(0.0) as usize).min(w);
    let y1 = ((b.cy() + 0.5 * side).ceil().max(0.0) as usize).min(h);
    if x1 <= x0 + 1 || y1 <= y0 + 1 {
        return None;
    }
    Some(Region { x0, y0, w: x1 - x0, h: y1 - y0 })
}

/// The feathered elliptical mask of one face, in output pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaceMask {
    pub cx: f32,
    pub cy: f32,
    /// Semi-axes of the inner (mask = 1) ellipse.
    pub ax: f32,
    pub ay: f32,
}

impl FaceMask {
    /// Mask of input-pixel box `b` on an output `scale` times larger.
    pub fn new(b: &FaceBox, scale: f32) -> FaceMask {
        FaceMask {
            cx: b.cx() * scale,
            cy: b.cy() * scale,
            ax: (0.5 * INNER * b.width() * scale).max(0.5),
            ay: (0.5 * INNER * b.height() * scale).max(0.5),
        }
    }

    /// Mask value at output pixel (x, y) (its centre): 1 inside, raised cosine to 0 outside.
    #[inline]
    pub fn at(&self, x: usize, y: usize) -> f32 {
        let dx = (x as f32 + 0.5 - self.cx) / self.ax;
        let dy = (y as f32 + 0.5 - self.cy) / self.ay;
        let r = (dx * dx + dy * dy).sqrt();
        if r <= 1.0 {
            1.0
        } else if r >= 1.0 + FEATHER {
            0.0
        } else {
            let t = (r - 1.0) / FEATHER;
            0.5 * (1.0 + (std::f32::consts::PI * t).cos())
        }
    }
}

/// Blend `face` (the size of `region`, output pixels) into `dst` at `region`, weighted by
/// `mask` x `strength`: dst = dst (1 - m) + face m. Alpha is left alone.
pub fn blend_into(dst: &mut RasterMut<'_>, region: Region, face: &Rgb, mask: &FaceMask, strength: f32) {
    debug_assert_eq!((face.w, face.h), (region.w, region.h));
    let s = strength.clamp(0.0, 1.0);
    for y in 0..region.h.min(dst.height.saturating_sub(region.y0)) {
        let oy = region.y0 + y;
        for x in 0..region.w.min(dst.width.saturating_sub(region.x0)) {
            let ox = region.x0 + x;
            let m = mask.at(ox, oy) * s;
            if m <= 0.0 {
                continue;
            }
            let b = dst_rgb(dst, ox, oy);
            let f = face.rgb(x, y);
            dst.set_rgb(ox, oy, [b[0] + m * (f[0] - b[0]), b[1] + m * (f[1] - b[1]), b[2] + m * (f[2] - b[2])]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fb(x0: f32, y0: f32, x1: f32, y1: f32) -> FaceBox {
        FaceBox { x0, y0, x1, y1, score: 1.0, landmarks: [[0.0; 2]; 5] }
    }

    #[test]
    fn mask_is_zero_on_interior_crop_edges() {
        for (b, s) in [(fb(40.0, 50.0, 80.0, 100.0), 2usize), (fb(100.0, 100.0, 160.0, 130.0), 4), (fb(30.0, 30.0, 41.0, 44.0), 1)] {
            let r = face_region(&b, 1000, 1000).unwrap();
            let o = r.scaled(s);
            let m = FaceMask::new(&b, s as f32);
            for x in o.x0..o.x0 + o.w {
                assert_eq!(m.at(x, o.y0), 0.0);
                assert_eq!(m.at(x, o.y0 + o.h - 1), 0.0);
            }
            for y in o.y0..o.y0 + o.h {
                assert_eq!(m.at(o.x0, y), 0.0);
                assert_eq!(m.at(o.x0 + o.w - 1, y), 0.0);
            }
            // Full weight over the face box itself.
            assert_eq!(m.at((b.cx() * s as f32) as usize, (b.cy() * s as f32) as usize), 1.0);
            assert_eq!(m.at((b.x0 * s as f32 + 1.0) as usize, (b.cy() * s as f32) as usize), 1.0);
        }
    }

    #[test]
    fn region_is_clipped_to_the_image() {
        let r = face_region(&fb(0.0, 0.0, 20.0, 20.0), 30, 25).unwrap();
        assert_eq!(r, Region { x0: 0, y0: 0, w: 28, h: 25 });
    }
}
