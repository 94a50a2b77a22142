//! Interleaved 8/16-bit pixel buffers the pipelines read from and write into directly, so that no
//! full-resolution float image is ever held: 1 = gray, 2 = gray + alpha, 3 = RGB, 4 = RGBA.

use lucent_core::{Code, Error, Result};

#[derive(Debug, Clone, PartialEq)]
pub enum Samples {
    U8(Vec<u8>),
    U16(Vec<u16>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Raster {
    pub width: usize,
    pub height: usize,
    pub channels: usize,
    pub samples: Samples,
}

#[derive(Debug, Clone, Copy)]
pub enum SamplesRef<'a> {
    U8(&'a [u8]),
    U16(&'a [u16]),
}

/// A borrowed raster (the source side of a pipeline).
#[derive(Debug, Clone, Copy)]
pub struct RasterRef<'a> {
    pub width: usize,
    pub height: usize,
    pub channels: usize,
    pub samples: SamplesRef<'a>,
}

pub enum SamplesMut<'a> {
    U8(&'a mut [u8]),
    U16(&'a mut [u16]),
}

/// A mutably borrowed raster (the destination side of a pipeline).
pub struct RasterMut<'a> {
    pub width: usize,
    pub height: usize,
    pub channels: usize,
    pub samples: SamplesMut<'a>,
}

fn check_len(w: usize, h: usize, c: usize, len: usize) -> Result<()> {
    if !(1..=4).contains(&c) {
        return Err(Error::new(Code::InvalidArgument, format!("{c} channels: expected 1..4")));
    }
    match w.checked_mul(h).and_then(|p| p.checked_mul(c)) {
        Some(n) if n == len => Ok(()),
        _ => Err(Error::new(Code::InvalidArgument, format!("pixel buffer of {len} samples does not hold {w}x{h}x{c}"))),
    }
}

impl Raster {
    /// A zeroed raster; `image_too_large` when the allocation would not fit.
    pub fn new(width: usize, height: usize, channels: usize, bit_depth: u8) -> Result<Raster> {
        let n = width
            .checked_mul(height)
            .and_then(|p| p.checked_mul(channels))
            .ok_or_else(|| Error::new(Code::ImageTooLarge, "output size overflows"))?;
        let samples = if bit_depth > 8 {
            let mut v = Vec::new();
            v.try_reserve_exact(n).map_err(|_| Error::new(Code::ImageTooLarge, format!("cannot allocate {n} samples")))?;
            v.resize(n, 0u16);
            Samples::U16(v)
        } else {
            let mut v = Vec::new();
            v.try_reserve_exact(n).map_err(|_| Error::new(Code::ImageTooLarge, format!("cannot allocate {n} samples")))?;
            v.resize(n, 0u8);
            Samples::U8(v)
        };
        Ok(Raster { width, height, channels, samples })
    }

    pub fn from_u8(width: usize, height: usize, channels: usize, data: Vec<u8>) -> Result<Raster> {
        check_len(width, height, channels, data.len())?;
        Ok(Raster { width, height, channels, samples: Samples::U8(data) })
    }

    pub fn from_u16(width: usize, height: usize, channels: usize, data: Vec<u16>) -> Result<Raster> {
        check_len(width, height, channels, data.len())?;
        Ok(Raster { width, height, channels, samples: Samples::U16(data) })
    }

    pub fn bit_depth(&self) -> u8 {
        match self.samples {
            Samples::U8(_) => 8,
            Samples::U16(_) => 16,
        }
    }

    pub fn as_ref(&self) -> RasterRef<'_> {
        RasterRef {
            width: self.width,
            height: self.height,
            channels: self.channels,
            samples: match &self.samples {
                Samples::U8(v) => SamplesRef::U8(v),
                Samples::U16(v) => SamplesRef::U16(v),
            },
        }
    }

    pub fn as_mut(&mut self) -> RasterMut<'_> {
        RasterMut {
            width: self.width,
            height: self.height,
            channels: self.channels,
            samples: match &mut self.samples {
                Samples::U8(v) => SamplesMut::U8(v),
                Samples::U16(v) => SamplesMut::U16(v),
            },
        }
    }

    /// Sample (x, y, channel) as 0..1.
    pub fn get(&self, x: usize, y: usize, c: usize) -> f32 {
        self.as_ref().get(x, y, c)
    }
}

impl<'a> RasterRef<'a> {
    pub fn new_u8(width: usize, height: usize, channels: usize, data: &'a [u8]) -> Result<Self> {
        check_len(width, height, channels, data.len())?;
        Ok(RasterRef { width, height, channels, samples: SamplesRef::U8(data) })
    }

    pub fn has_alpha(&self) -> bool {
        self.channels == 2 || self.channels == 4
    }
    pub fn color_channels(&self) -> usize {
        if self.channels >= 3 { 3 } else { 1 }
    }
    pub fn bit_depth(&self) -> u8 {
        match self.samples {
            SamplesRef::U8(_) => 8,
            SamplesRef::U16(_) => 16,
        }
    }

    #[inline]
    pub fn get(&self, x: usize, y: usize, c: usize) -> f32 {
        let i = (y * self.width + x) * self.channels + c;
        match self.samples {
            SamplesRef::U8(v) => v[i] as f32 * (1.0 / 255.0),
            SamplesRef::U16(v) => v[i] as f32 * (1.0 / 65535.0),
        }
    }

    /// RGB at (x, y) as 0..1 (gray replicated).
    #[inline]
    pub fn rgb(&self, x: usize, y: usize) -> [f32; 3] {
        if self.channels >= 3 {
            [self.get(x, y, 0), self.get(x, y, 1), self.get(x, y, 2)]
        } else {
            let g = self.get(x, y, 0);
            [g, g, g]
        }
    }

    /// Alpha at (x, y) as 0..1 (1 when there is none).
    #[inline]
    pub fn alpha(&self, x: usize, y: usize) -> f32 {
        if self.has_alpha() { self.get(x, y, self.channels - 1) } else { 1.0 }
    }
}

impl<'a> RasterMut<'a> {
    pub fn new_u8(width: usize, height: usize, channels: usize, data: &'a mut [u8]) -> Result<Self> {
        check_len(width, height, channels, data.len())?;
        Ok(RasterMut { width, height, channels, samples: SamplesMut::U8(data) })
    }

    pub fn has_alpha(&self) -> bool {
        self.channels == 2 || self.channels == 4
    }

    /// Store a 0..1 value (clamped, rounded; NaN stores 0).
    #[inline]
    pub fn set(&mut self, x: usize, y: usize, c: usize, v: f32) {
        let i = (y * self.width + x) * self.channels + c;
        let v = if v.is_nan() { 0.0 } else { v.clamp(0.0, 1.0) };
        match &mut self.samples {
            SamplesMut::U8(d) => d[i] = (v * 255.0 + 0.5) as u8,
            SamplesMut::U16(d) => d[i] = (v * 65535.0 + 0.5) as u16,
        }
    }

    /// Store an RGB colour; for gray rasters the BT.601 luma of it.
    #[inline]
    pub fn set_rgb(&mut self, x: usize, y: usize, rgb: [f32; 3]) {
        if self.channels >= 3 {
            self.set(x, y, 0, rgb[0]);
            self.set(x, y, 1, rgb[1]);
            self.set(x, y, 2, rgb[2]);
        } else {
            self.set(x, y, 0, 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]);
        }
    }
}
