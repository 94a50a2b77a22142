//! Small float RGB images for the face path (face crops, the detector's input) and a separable
//! resampler: Catmull-Rom (a = -0.5), pixel-centre aligned, edges clamped, with the kernel widened
//! by the reduction factor when downscaling (so a downscale averages instead of aliasing).

use crate::raster::{Raster, RasterMut, RasterRef, SamplesMut};
use crate::resample::cubic;
use lucent_core::Result;

/// Planar RGB, 0..1 nominal (values outside are allowed until stored).
#[derive(Debug, Clone, PartialEq)]
pub struct Rgb {
    pub w: usize,
    pub h: usize,
    /// 3 planes of h x w.
    pub data: Vec<f32>,
}

impl Rgb {
    pub fn new(w: usize, h: usize) -> Rgb {
        Rgb { w, h, data: vec![0.0; 3 * w * h] }
    }

    #[inline]
    pub fn get(&self, c: usize, x: usize, y: usize) -> f32 {
        self.data[(c * self.h + y) * self.w + x]
    }

    #[inline]
    pub fn set(&mut self, c: usize, x: usize, y: usize, v: f32) {
        self.data[(c * self.h + y) * self.w + x] = v;
    }

    #[inline]
    pub fn rgb(&self, x: usize, y: usize) -> [f32; 3] {
        [self.get(0, x, y), self.get(1, x, y), self.get(2, x, y)]
    }

    /// The (x0, y0, w, h) rectangle of `src`'s colour (gray replicated).
    pub fn crop(src: RasterRef<'_>, x0: usize, y0: usize, w: usize, h: usize) -> Rgb {
        let mut o = Rgb::new(w, h);
        for y in 0..h {
            for x in 0..w {
                let c = src.rgb(x0 + x, y0 + y);
                for (k, v) in c.into_iter().enumerate() {
                    o.set(k, x, y, v);
                }
            }
        }
        o
    }

    /// A 3-channel 16-bit raster of this image (clamped), for the tiled SR runner.
    pub fn to_raster16(&self) -> Result<Raster> {
        let mut v = Vec::with_capacity(3 * self.w * self.h);
        for y in 0..self.h {
            for x in 0..self.w {
                for c in 0..3 {
                    v.push((self.get(c, x, y).clamp(0.0, 1.0) * 65535.0 + 0.5) as u16);
                }
            }
        }
        Raster::from_u16(self.w, self.h, 3, v)
    }

    /// Colour of a raster (gray replicated).
    pub fn from_raster(r: RasterRef<'_>) -> Rgb {
        Rgb::crop(r, 0, 0, r.width, r.height)
    }

    /// Resample to nw x nh.
    pub fn resize(&self, nw: usize, nh: usize) -> Rgb {
        resize_with(self.w, self.h, nw, nh, |x, y| self.rgb(x, y))
    }
}

/// Read the colour at (x, y) of a mutable raster (gray replicated), 0..1.
#[inline]
pub fn dst_rgb(d: &RasterMut<'_>, x: usize, y: usize) -> [f32; 3] {
    let i = (y * d.width + x) * d.channels;
    let g = |k: usize| match &d.samples {
        SamplesMut::U8(v) => v[i + k] as f32 * (1.0 / 255.0),
        SamplesMut::U16(v) => v[i + k] as f32 * (1.0 / 65535.0),
    };
    if d.channels >= 3 {
        [g(0), g(1), g(2)]
    } else {
        let v = g(0);
        [v, v, v]
    }
}

/// Per output index: (first source index, weights over consecutive clamped source indices).
struct Taps {
    idx: Vec<Vec<usize>>,
    wt: Vec<Vec<f32>>,
}

fn taps(n_in: usize, n_out: usize) -> Taps {
    let scale = n_in as f32 / n_out as f32;
    let widen = scale.max(1.0);
    let support = 2.0 * widen;
    let mut idx = Vec::with_capacity(n_out);
    let mut wt = Vec::with_capacity(n_out);
    for o in 0..n_out {
        let centre = (o as f32 + 0.5) * scale - 0.5;
        let lo = (centre - support).floor() as isize;
        let hi = (centre + support).ceil() as isize;
        let mut ii = Vec::new();
        let mut ww = Vec::new();
        for i in lo..=hi {
            let w = cubic((i as f32 - centre) / widen);
            if w != 0.0 {
                ii.push(i.clamp(0, n_in as isize - 1) as usize);
                ww.push(w);
            }
        }
        let s: f32 = ww.iter().sum();
        if s.abs() > 1e-12 {
            ww.iter_mut().for_each(|w| *w /= s);
        }
        idx.push(ii);
        wt.push(ww);
    }
    Taps { idx, wt }
}

/// Resample a w x h image given by `sample(x, y)` to nw x nh (horizontal pass first).
pub fn resize_with(w: usize, h: usize, nw: usize, nh: usize, sample: impl Fn(usize, usize) -> [f32; 3]) -> Rgb {
    let mut out = Rgb::new(nw, nh);
    if w == 0 || h == 0 || nw == 0 || nh == 0 {
        return out;
    }
    let hx = taps(w, nw);
    let vy = taps(h, nh);
    // Horizontal: h rows of nw, interleaved RGB.
    let mut tmp = vec![0f32; 3 * nw * h];
    let mut row = vec![[0f32; 3]; w];
    for y in 0..h {
        for (x, r) in row.iter_mut().enumerate() {
            *r = sample(x, y);
        }
        for ox in 0..nw {
            let mut a = [0f32; 3];
            for (&i, &wt) in hx.idx[ox].iter().zip(&hx.wt[ox]) {
                let p = row[i];
                a[0] += wt * p[0];
                a[1] += wt * p[1];
                a[2] += wt * p[2];
            }
            let k = 3 * (y * nw + ox);
            tmp[k..k + 3].copy_from_slice(&a);
        }
    }
    for oy in 0..nh {
        for ox in 0..nw {
            let mut a = [0f32; 3];
            for (&i, &wt) in vy.idx[oy].iter().zip(&vy.wt[oy]) {
                let k = 3 * (i * nw + ox);
                a[0] += wt * tmp[k];
                a[1] += wt * tmp[k + 1];
                a[2] += wt * tmp[k + 2];
            }
            for (c, v) in a.into_iter().enumerate() {
                out.set(c, ox, oy, v);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resize_keeps_constants_and_identity() {
        let mut a = Rgb::new(7, 5);
        a.data.iter_mut().enumerate().for_each(|(i, v)| *v = (i % 13) as f32 / 13.0);
        assert_eq!(a.resize(7, 5), a);
        let mut c = Rgb::new(9, 6);
        c.data.iter_mut().for_each(|v| *v = 0.25);
        for (w, h) in [(3, 2), (20, 17), (9, 1)] {
            let r = c.resize(w, h);
            assert!(r.data.iter().all(|v| (v - 0.25).abs() < 1e-5), "{w}x{h}");
        }
        // Area-like downscale of a 2-pixel checker averages to the mean.
        let mut k = Rgb::new(16, 16);
        for y in 0..16 {
            for x in 0..16 {
                for ch in 0..3 {
                    k.set(ch, x, y, ((x + y) % 2) as f32);
                }
            }
        }
        let d = k.resize(4, 4);
        assert!(d.data.iter().all(|v| (v - 0.5).abs() < 0.05), "{:?}", d.data);
    }
}
