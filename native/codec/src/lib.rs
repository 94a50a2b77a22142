//! Lucent image codecs: decode/encode bmp, jpeg, png, tga, tiff, webp (via the `image` crate) and
//! heif/heic (via the system libheif, feature `heif`), with metadata handling (EXIF, DPI, ICC,
//! orientation) and conversions to/from the planar float RGB the networks take.
//!
//! EXIF blobs (`Metadata::exif`) are raw TIFF structures ("II*\0"/"MM\0*" header first), without
//! the "Exif\0\0" prefix.
//!
//! Long (~780 lines) on purpose: the public codec surface (decode, encode, metadata, pixel conversions) in
//! one file so its contract reads in one place; EXIF parsing lives in `exif.rs`.

mod exif;
#[cfg(lucent_heif)]
mod heif;
mod meta;
mod probe;
mod tiff_enc;

use std::fmt;
use std::io::Cursor;
use std::panic::{catch_unwind, AssertUnwindSafe};

use exif::Exif;

// ------------------------------------------------------------------ formats

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    Bmp,
    Jpeg,
    Png,
    Tga,
    Tiff,
    Webp,
    Heif,
}

impl Format {
    pub const ALL: [Format; 7] = [Format::Bmp, Format::Jpeg, Format::Png, Format::Tga, Format::Tiff, Format::Webp, Format::Heif];

    /// Maps a file extension (with or without the leading dot, any case) to a format.
    pub fn from_extension(ext: &str) -> Option<Format> {
        let e = ext.trim().trim_start_matches('.').to_ascii_lowercase();
        Some(match e.as_str() {
            "bmp" | "dib" => Format::Bmp,
            "jpg" | "jpeg" | "jfif" | "jpe" => Format::Jpeg,
            "png" => Format::Png,
            "tga" | "tpic" => Format::Tga,
            "tif" | "tiff" => Format::Tiff,
            "webp" => Format::Webp,
            "heif" | "heic" | "hif" => Format::Heif,
            _ => return None,
        })
    }

    /// Canonical file extension, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Bmp => "bmp",
            Format::Jpeg => "jpg",
            Format::Png => "png",
            Format::Tga => "tga",
            Format::Tiff => "tiff",
            Format::Webp => "webp",
            Format::Heif => "heic",
        }
    }

    pub fn mime(self) -> &'static str {
        match self {
            Format::Bmp => "image/bmp",
            Format::Jpeg => "image/jpeg",
            Format::Png => "image/png",
            Format::Tga => "image/x-tga",
            Format::Tiff => "image/tiff",
            Format::Webp => "image/webp",
            Format::Heif => "image/heic",
        }
    }

    /// Whether `encode` can write 16-bit samples in this format.
    pub fn supports_16bit(self) -> bool {
        matches!(self, Format::Png | Format::Tiff)
    }
}

/// Sniffs the format from magic numbers only (TGA, which has none, by header plausibility).
pub fn detect_format(bytes: &[u8]) -> Option<Format> {
    probe::detect(bytes)
}

// ------------------------------------------------------------------ errors

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CodecErrorCode {
    UnsupportedFormat,
    DecodeFailed,
    EncodeFailed,
    ImageTooLarge,
}

impl CodecErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            CodecErrorCode::UnsupportedFormat => "unsupported_format",
            CodecErrorCode::DecodeFailed => "decode_failed",
            CodecErrorCode::EncodeFailed => "encode_failed",
            CodecErrorCode::ImageTooLarge => "image_too_large",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodecError {
    pub code: CodecErrorCode,
    pub message: String,
}

impl CodecError {
    pub fn new(code: CodecErrorCode, message: impl Into<String>) -> CodecError {
        CodecError { code, message: message.into() }
    }
    pub(crate) fn decode(m: impl Into<String>) -> CodecError {
        CodecError::new(CodecErrorCode::DecodeFailed, m)
    }
    pub(crate) fn encode(m: impl Into<String>) -> CodecError {
        CodecError::new(CodecErrorCode::EncodeFailed, m)
    }
    pub(crate) fn unsupported(m: impl Into<String>) -> CodecError {
        CodecError::new(CodecErrorCode::UnsupportedFormat, m)
    }
    pub(crate) fn too_large(m: impl Into<String>) -> CodecError {
        CodecError::new(CodecErrorCode::ImageTooLarge, m)
    }
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for CodecError {}

// ------------------------------------------------------------------ data types

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    pub format: Format,
    pub width: u32,
    pub height: u32,
    /// Channels `decode` will return: 1 gray, 2 gray+alpha, 3 rgb, 4 rgba.
    pub channels: u8,
    /// 8 or 16.
    pub bit_depth: u8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pixels {
    U8(Vec<u8>),
    U16(Vec<u16>),
}

impl Pixels {
    pub fn len(&self) -> usize {
        match self {
            Pixels::U8(v) => v.len(),
            Pixels::U16(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata {
    /// Raw TIFF-structured EXIF block (no "Exif\0\0" prefix).
    pub exif: Option<Vec<u8>>,
    /// (x, y) dots per inch.
    pub dpi: Option<(f64, f64)>,
    pub icc: Option<Vec<u8>>,
    /// EXIF/TIFF orientation 1..=8 (not applied to the pixels).
    pub orientation: Option<u16>,
}

/// Decoded pixels, interleaved, rows top to bottom.
#[derive(Clone, Debug, PartialEq)]
pub struct Image {
    pub width: u32,
    pub height: u32,
    /// 1 gray, 2 gray+alpha, 3 rgb, 4 rgba.
    pub channels: u8,
    /// 8 (`Pixels::U8`) or 16 (`Pixels::U16`).
    pub bit_depth: u8,
    pub data: Pixels,
    pub meta: Metadata,
}

impl Image {
    pub fn from_u8(width: u32, height: u32, channels: u8, data: Vec<u8>) -> Image {
        Image { width, height, channels, bit_depth: 8, data: Pixels::U8(data), meta: Metadata::default() }
    }
    pub fn from_u16(width: u32, height: u32, channels: u8, data: Vec<u16>) -> Image {
        Image { width, height, channels, bit_depth: 16, data: Pixels::U16(data), meta: Metadata::default() }
    }
    pub fn has_alpha(&self) -> bool {
        self.channels == 2 || self.channels == 4
    }
    fn validate(&self) -> Result<(), CodecError> {
        if self.width == 0 || self.height == 0 {
            return Err(CodecError::encode("image has zero width or height"));
        }
        if !(1..=4).contains(&self.channels) {
            return Err(CodecError::encode(format!("bad channel count {}", self.channels)));
        }
        let want = self.width as u64 * self.height as u64 * self.channels as u64;
        let (len, depth) = match &self.data {
            Pixels::U8(v) => (v.len(), 8),
            Pixels::U16(v) => (v.len(), 16),
        };
        if depth != self.bit_depth {
            return Err(CodecError::encode(format!("bit_depth {} does not match the pixel buffer", self.bit_depth)));
        }
        if len as u64 != want {
            return Err(CodecError::encode(format!("pixel buffer has {len} samples, expected {want}")));
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest width * height accepted.
    pub max_pixels: u64,
    /// Largest decoded pixel buffer (and decoder allocation budget) in bytes.
    pub max_alloc_bytes: u64,
}

impl Default for Limits {
    /// 100 megapixels and 1 GiB: covers the largest accepted inputs (70 MP) with 16-bit RGBA.
    fn default() -> Limits {
        Limits { max_pixels: 100_000_000, max_alloc_bytes: 1 << 30 }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EncodeOptions {
    /// Keep the input's EXIF (dimensions updated, orientation preserved); strip it otherwise.
    pub keep_exif: bool,
    /// Output DPI; `None` keeps the input's DPI if it had one.
    pub dpi: Option<f64>,
    /// 1..=100 for jpeg and heif (0 = default 90). WebP is always written lossless.
    pub quality: u8,
}

impl Default for EncodeOptions {
    fn default() -> EncodeOptions {
        EncodeOptions { keep_exif: false, dpi: None, quality: 90 }
    }
}

/// What this crate reads from an EXIF block (see [`read_exif`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ExifInfo {
    pub orientation: Option<u16>,
    pub dpi: Option<(f64, f64)>,
    /// PixelXDimension / PixelYDimension from the EXIF sub-IFD.
    pub pixel_dimensions: Option<(u32, u32)>,
    /// Number of IFD0 entries.
    pub ifd0_entries: usize,
}

/// Parses an EXIF block (raw TIFF structure, "Exif\0\0"-prefixed also accepted).
pub fn read_exif(blob: &[u8]) -> Option<ExifInfo> {
    let x = Exif::parse(blob)?;
    Some(ExifInfo { orientation: x.orientation(), dpi: x.dpi(), pixel_dimensions: x.pixel_dimensions(), ifd0_entries: x.ifd0.entries.len() })
}

// ------------------------------------------------------------------ panic guard

fn guarded<T>(code: CodecErrorCode, f: impl FnOnce() -> Result<T, CodecError>) -> Result<T, CodecError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(CodecError::new(code, format!("codec panicked: {msg}")))
        }
    }
}

// ------------------------------------------------------------------ options

/// The codec's process-wide options (the crate reads no environment; the engine applies these
/// from its own options, [`configure`]). `Default` is the behaviour without any setting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CodecOptions {
    /// x265 preset of HEIF output (`LUCENT_HEIF_PRESET`): lowercase letters; anything else, or
    /// None, gives "ultrafast"; a preset the encoder does not know leaves it on its own default.
    pub heif_preset: Option<String>,
}

static OPTIONS: std::sync::RwLock<Option<CodecOptions>> = std::sync::RwLock::new(None);

/// Sets the process's codec options (the engine calls it when it is built; the last call holds).
pub fn configure(o: &CodecOptions) {
    *OPTIONS.write().unwrap_or_else(|p| p.into_inner()) = Some(o.clone());
}

/// The configured HEIF preset, if any.
#[cfg_attr(not(lucent_heif), allow(dead_code))]
pub(crate) fn heif_preset() -> Option<String> {
    OPTIONS.read().unwrap_or_else(|p| p.into_inner()).as_ref().and_then(|o| o.heif_preset.clone())
}

// ------------------------------------------------------------------ probe / decode

/// Format, size, channels and bit depth from magic numbers and headers only.
pub fn probe(bytes: &[u8]) -> Result<Probe, CodecError> {
    guarded(CodecErrorCode::DecodeFailed, || probe::probe(bytes))
}

#[cfg(lucent_heif)]
pub(crate) fn heif_probe(bytes: &[u8]) -> Result<Probe, CodecError> {
    heif::probe(bytes)
}

#[cfg(not(lucent_heif))]
pub(crate) fn heif_probe(_bytes: &[u8]) -> Result<Probe, CodecError> {
    Err(CodecError::unsupported("HEIF support is not built in (feature `heif` / libheif missing)"))
}

/// Whether HEIF/HEIC files can be decoded here.
pub fn heif_decode_supported() -> bool {
    #[cfg(lucent_heif)]
    {
        heif::can_decode()
    }
    #[cfg(not(lucent_heif))]
    {
        false
    }
}

/// Whether HEIC can be encoded here (needs libheif's x265 encoder plugin).
pub fn heif_encode_supported() -> bool {
    #[cfg(lucent_heif)]
    {
        heif::can_encode()
    }
    #[cfg(not(lucent_heif))]
    {
        false
    }
}

pub(crate) fn check_limits(p: &Probe, limits: &Limits) -> Result<(), CodecError> {
    let pixels = p.width as u64 * p.height as u64;
    if pixels > limits.max_pixels {
        return Err(CodecError::too_large(format!(
            "{}x{} = {pixels} pixels exceeds the limit of {}",
            p.width, p.height, limits.max_pixels
        )));
    }
    let bytes = pixels * p.channels.max(1) as u64 * if p.bit_depth > 8 { 2 } else { 1 };
    if bytes > limits.max_alloc_bytes {
        return Err(CodecError::too_large(format!(
            "decoded {}x{} image needs {bytes} bytes, over the limit of {}",
            p.width, p.height, limits.max_alloc_bytes
        )));
    }
    Ok(())
}

/// Decodes any supported format. Header dimensions are checked against `limits` before any
/// pixel buffer is allocated.
pub fn decode(bytes: &[u8], limits: &Limits) -> Result<Image, CodecError> {
    guarded(CodecErrorCode::DecodeFailed, || decode_inner(bytes, limits))
}

fn image_format(f: Format) -> image::ImageFormat {
    match f {
        Format::Bmp => image::ImageFormat::Bmp,
        Format::Jpeg => image::ImageFormat::Jpeg,
        Format::Png => image::ImageFormat::Png,
        Format::Tga => image::ImageFormat::Tga,
        Format::Tiff => image::ImageFormat::Tiff,
        Format::Webp => image::ImageFormat::WebP,
        Format::Heif => unreachable!("HEIF is not decoded by the image crate"),
    }
}

fn map_image_err(e: image::ImageError, decoding: bool) -> CodecError {
    use image::ImageError as E;
    match e {
        E::Limits(l) => CodecError::too_large(format!("image limits: {l}")),
        E::Unsupported(u) => CodecError::unsupported(u.to_string()),
        other if decoding => CodecError::decode(other.to_string()),
        other => CodecError::encode(other.to_string()),
    }
}

fn decode_inner(bytes: &[u8], limits: &Limits) -> Result<Image, CodecError> {
    let p = probe::probe(bytes)?;
    check_limits(&p, limits)?;
    if p.format == Format::Heif {
        #[cfg(lucent_heif)]
        return heif::decode(bytes, limits);
        #[cfg(not(lucent_heif))]
        return Err(CodecError::unsupported("HEIF support is not built in"));
    }
    let meta = match p.format {
        Format::Jpeg => meta::jpeg_read(bytes),
        Format::Png => meta::png_read(bytes),
        Format::Webp => meta::webp_read(bytes),
        Format::Bmp => meta::bmp_read(bytes),
        Format::Tga => meta::tga_read(bytes),
        Format::Tiff => meta::tiff_read(bytes),
        Format::Heif => unreachable!(),
    };
    let mut reader = image::ImageReader::with_format(Cursor::new(bytes), image_format(p.format));
    let mut il = image::Limits::default();
    il.max_image_width = Some(limits.max_pixels.min(u32::MAX as u64) as u32);
    il.max_image_height = Some(limits.max_pixels.min(u32::MAX as u64) as u32);
    il.max_alloc = Some(limits.max_alloc_bytes);
    reader.limits(il);
    let dynimg = reader.decode().map_err(|e| map_image_err(e, true))?;
    let (w, h) = (dynimg.width(), dynimg.height());
    if w as u64 * h as u64 > limits.max_pixels {
        return Err(CodecError::too_large("decoded image exceeds the pixel limit"));
    }
    let (channels, data) = dynamic_to_pixels(dynimg);
    let bit_depth = match data {
        Pixels::U8(_) => 8,
        Pixels::U16(_) => 16,
    };
    Ok(Image { width: w, height: h, channels, bit_depth, data, meta })
}

fn dynamic_to_pixels(d: image::DynamicImage) -> (u8, Pixels) {
    use image::DynamicImage as D;
    match d {
        D::ImageLuma8(b) => (1, Pixels::U8(b.into_raw())),
        D::ImageLumaA8(b) => (2, Pixels::U8(b.into_raw())),
        D::ImageRgb8(b) => (3, Pixels::U8(b.into_raw())),
        D::ImageRgba8(b) => (4, Pixels::U8(b.into_raw())),
        D::ImageLuma16(b) => (1, Pixels::U16(b.into_raw())),
        D::ImageLumaA16(b) => (2, Pixels::U16(b.into_raw())),
        D::ImageRgb16(b) => (3, Pixels::U16(b.into_raw())),
        D::ImageRgba16(b) => (4, Pixels::U16(b.into_raw())),
        D::ImageRgb32F(b) => (3, Pixels::U16(b.into_raw().into_iter().map(f32_to_u16).collect())),
        D::ImageRgba32F(b) => (4, Pixels::U16(b.into_raw().into_iter().map(f32_to_u16).collect())),
        other => (4, Pixels::U8(other.to_rgba8().into_raw())),
    }
}

fn f32_to_u16(v: f32) -> u16 {
    if v.is_nan() {
        0
    } else {
        (v.clamp(0.0, 1.0) * 65535.0 + 0.5) as u16
    }
}

// ------------------------------------------------------------------ sample conversions

fn u16_to_u8(v: u16) -> u8 {
    ((v as u32 * 255 + 32767) / 65535) as u8
}

/// Converts the pixel layout to `out_ch` channels at `out_depth` bits. Gray expands to RGB by
/// replication, RGB reduces to gray by BT.601 luma; missing alpha is opaque.
fn convert(img: &Image, out_ch: u8, out_depth: u8) -> Pixels {
    let in_ch = img.channels as usize;
    let oc = out_ch as usize;
    if img.channels == out_ch && img.bit_depth == out_depth {
        return img.data.clone();
    }
    let n = img.width as usize * img.height as usize;
    // Work in u16 (0..=65535) space when the depth changes or for 16-bit data.
    let sample = |i: usize| -> u32 {
        match &img.data {
            Pixels::U8(v) => v[i] as u32 * 257,
            Pixels::U16(v) => v[i] as u32,
        }
    };
    let mut out16: Vec<u16> = Vec::with_capacity(n * oc);
    for p in 0..n {
        let b = p * in_ch;
        let (r, g, bl, a) = match in_ch {
            1 => {
                let v = sample(b);
                (v, v, v, 65535)
            }
            2 => {
                let v = sample(b);
                (v, v, v, sample(b + 1))
            }
            3 => (sample(b), sample(b + 1), sample(b + 2), 65535),
            _ => (sample(b), sample(b + 1), sample(b + 2), sample(b + 3)),
        };
        let gray = || {
            if in_ch <= 2 {
                r
            } else {
                ((299 * r + 587 * g + 114 * bl + 500) / 1000).min(65535)
            }
        };
        match oc {
            1 => out16.push(gray() as u16),
            2 => {
                out16.push(gray() as u16);
                out16.push(a as u16);
            }
            3 => out16.extend_from_slice(&[r as u16, g as u16, bl as u16]),
            _ => out16.extend_from_slice(&[r as u16, g as u16, bl as u16, a as u16]),
        }
    }
    if out_depth == 16 {
        Pixels::U16(out16)
    } else {
        Pixels::U8(out16.into_iter().map(u16_to_u8).collect())
    }
}

fn u8_of(p: &Pixels) -> &[u8] {
    match p {
        Pixels::U8(v) => v,
        Pixels::U16(_) => unreachable!("expected 8-bit pixels"),
    }
}

fn ext_color(ch: u8, depth: u8) -> image::ExtendedColorType {
    use image::ExtendedColorType as C;
    match (ch, depth) {
        (1, 8) => C::L8,
        (2, 8) => C::La8,
        (3, 8) => C::Rgb8,
        (4, 8) => C::Rgba8,
        (1, _) => C::L16,
        (2, _) => C::La16,
        (3, _) => C::Rgb16,
        (_, _) => C::Rgba16,
    }
}

// ------------------------------------------------------------------ encode

/// Encodes `img` as `format`. 16-bit images stay 16-bit in png and tiff and are reduced to 8 bits
/// elsewhere; alpha is dropped for jpeg; gray is expanded to RGB for heif.
pub fn encode(img: &Image, format: Format, opts: &EncodeOptions) -> Result<Vec<u8>, CodecError> {
    encode_with_png(img, format, opts, PngDeflate::Level3)
}

/// How a PNG's pixel data is deflated (both with adaptive filters; the format is the same).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PngDeflate {
    /// zlib level 3: what [`encode`] writes.
    #[default]
    Level3,
    /// The png crate's fdeflate mode, tuned for filtered PNG rows: on the segmentation bench's
    /// 12 MP matted RGBA about 13x faster than level 3 and 4 % smaller there (docs/segmentation.md);
    /// on other images it may code larger, so only callers that measured it ask for it.
    Fast,
}

/// [`encode`] with the PNG deflate mode chosen (other formats ignore `png`).
pub fn encode_with_png(img: &Image, format: Format, opts: &EncodeOptions, png: PngDeflate) -> Result<Vec<u8>, CodecError> {
    img.validate()?;
    guarded(CodecErrorCode::EncodeFailed, || encode_inner(img, format, opts, png))
}

fn encode_inner(img: &Image, format: Format, opts: &EncodeOptions, png: PngDeflate) -> Result<Vec<u8>, CodecError> {
    let (w, h) = (img.width, img.height);
    let dpi: Option<(f64, f64)> = match opts.dpi {
        Some(d) if d.is_finite() && d > 0.0 => Some((d, d)),
        Some(d) => return Err(CodecError::encode(format!("invalid DPI {d}"))),
        None => img.meta.dpi.filter(|(x, y)| x.is_finite() && y.is_finite() && *x > 0.0 && *y > 0.0),
    };
    let quality = if opts.quality == 0 { 90 } else { opts.quality.min(100) };
    let icc = img.meta.icc.as_deref().filter(|v| !v.is_empty());

    // The EXIF to write: the input's (updated) when kept.
    let mut exif: Option<Exif> = if opts.keep_exif {
        img.meta.exif.as_deref().and_then(Exif::parse).map(|mut x| {
            x.set_pixel_dimensions(w, h);
            if let Some((dx, dy)) = dpi {
                x.set_dpi(dx, dy);
            }
            if let (Some(o), None) = (img.meta.orientation, x.orientation()) {
                x.ifd0.set(exif::Entry::short(x.endian, exif::TAG_ORIENTATION, &[o]));
            }
            x
        })
    } else {
        None
    };
    // Formats whose only place for DPI is EXIF get a minimal block when none is kept.
    if exif.is_none() && matches!(format, Format::Webp | Format::Heif | Format::Tga) {
        if let Some((dx, dy)) = dpi {
            let mut x = Exif::new();
            x.set_dpi(dx, dy);
            exif = Some(x);
        }
    }
    let exif_bytes = exif.as_ref().map(|x| x.to_bytes());

    let mut out = Vec::new();
    match format {
        Format::Png => {
            use image::codecs::png::{CompressionType, FilterType, PngEncoder};
            use image::ImageEncoder;
            let level = match png {
                PngDeflate::Level3 => CompressionType::Level(3),
                PngDeflate::Fast => CompressionType::Fast,
            };
            let mut enc = PngEncoder::new_with_quality(&mut out, level, FilterType::Adaptive);
            if let Some(icc) = icc {
                let _ = enc.set_icc_profile(icc.to_vec());
            }
            let color = ext_color(img.channels, img.bit_depth);
            match &img.data {
                Pixels::U8(v) => enc.write_image(v, w, h, color),
                Pixels::U16(v) => {
                    let bytes: Vec<u8> = v.iter().flat_map(|s| s.to_ne_bytes()).collect();
                    enc.write_image(&bytes, w, h, color)
                }
            }
            .map_err(|e| map_image_err(e, false))?;
            out = meta::png_set(&out, dpi, exif_bytes.as_deref());
        }
        Format::Jpeg => {
            use image::codecs::jpeg::{JpegEncoder, PixelDensity, PixelDensityUnit};
            use image::ImageEncoder;
            let ch = if img.channels <= 2 { 1 } else { 3 };
            let px = convert(img, ch, 8);
            let mut enc = JpegEncoder::new_with_quality(&mut out, quality);
            if let Some((dx, dy)) = dpi {
                let q = |v: f64| v.round().clamp(1.0, 65535.0) as u16;
                enc.set_pixel_density(PixelDensity { density: (q(dx), q(dy)), unit: PixelDensityUnit::Inches });
            }
            if let Some(icc) = icc {
                let _ = enc.set_icc_profile(icc.to_vec());
            }
            if let Some(x) = &exif_bytes {
                let _ = enc.set_exif_metadata(x.clone());
            }
            enc.write_image(u8_of(&px), w, h, ext_color(ch, 8)).map_err(|e| map_image_err(e, false))?;
        }
        Format::Bmp => {
            let ch = match img.channels {
                1 => 1,
                3 => 3,
                _ => 4,
            };
            let px = convert(img, ch, 8);
            image::codecs::bmp::BmpEncoder::new(&mut out)
                .encode(u8_of(&px), w, h, ext_color(ch, 8))
                .map_err(|e| map_image_err(e, false))?;
            if let Some(d) = dpi {
                meta::bmp_set_dpi(&mut out, d);
            }
        }
        Format::Tga => {
            let px = convert(img, img.channels, 8);
            image::codecs::tga::TgaEncoder::new(&mut out)
                .encode(u8_of(&px), w, h, ext_color(img.channels, 8))
                .map_err(|e| map_image_err(e, false))?;
            if let Some(x) = &exif_bytes {
                meta::tga_append_exif(&mut out, x);
            }
        }
        Format::Tiff => {
            let orientation = if exif.is_some() { exif.as_ref().and_then(|x| x.orientation()) } else { None };
            // Gray+alpha TIFFs are not readable by the `image` crate: write those as RGBA.
            let (ch, px) = if img.channels == 2 { (4, convert(img, 4, img.bit_depth)) } else { (img.channels, img.data.clone()) };
            out = tiff_enc::encode(&tiff_enc::TiffInput {
                width: w,
                height: h,
                channels: ch,
                pixels: &px,
                dpi,
                orientation,
                exif: exif.as_ref(),
                icc,
            });
        }
        Format::Webp => {
            let px = convert(img, img.channels, 8);
            let ct = match img.channels {
                1 => image_webp::ColorType::L8,
                2 => image_webp::ColorType::La8,
                3 => image_webp::ColorType::Rgb8,
                _ => image_webp::ColorType::Rgba8,
            };
            let mut enc = image_webp::WebPEncoder::new(&mut out);
            if let Some(icc) = icc {
                enc.set_icc_profile(icc.to_vec());
            }
            if let Some(x) = &exif_bytes {
                enc.set_exif_metadata(x.clone());
            }
            enc.encode(u8_of(&px), w, h, ct).map_err(|e| CodecError::encode(format!("webp: {e}")))?;
        }
        Format::Heif => {
            #[cfg(lucent_heif)]
            {
                let ch = if img.has_alpha() { 4 } else { 3 };
                let px = convert(img, ch, 8);
                out = heif::encode(w, h, ch, u8_of(&px), quality, exif_bytes.as_deref(), icc)?;
            }
            #[cfg(not(lucent_heif))]
            return Err(CodecError::unsupported("HEIF support is not built in"));
        }
    }
    Ok(out)
}

// ------------------------------------------------------------------ planar float helpers

/// Planar float RGB in 0..=1 (3*h*w, R plane then G then B) plus an optional alpha plane (h*w).
/// Gray expands to three equal planes; 16-bit precision is kept.
pub fn to_planar_rgb(img: &Image) -> (Vec<f32>, Option<Vec<f32>>) {
    let n = img.width as usize * img.height as usize;
    let ch = img.channels as usize;
    let mut rgb = vec![0f32; 3 * n];
    let mut alpha = if img.has_alpha() { Some(vec![0f32; n]) } else { None };
    fn fill<T: Copy>(src: &[T], ch: usize, n: usize, scale: f32, f: impl Fn(T) -> f32, rgb: &mut [f32], alpha: &mut Option<Vec<f32>>) {
        let (r, rest) = rgb.split_at_mut(n);
        let (g, b) = rest.split_at_mut(n);
        for i in 0..n {
            let px = &src[i * ch..i * ch + ch];
            let (rv, gv, bv) = if ch <= 2 { (px[0], px[0], px[0]) } else { (px[0], px[1], px[2]) };
            r[i] = f(rv) * scale;
            g[i] = f(gv) * scale;
            b[i] = f(bv) * scale;
            if let Some(a) = alpha.as_mut() {
                a[i] = f(px[ch - 1]) * scale;
            }
        }
    }
    match &img.data {
        Pixels::U8(v) => fill(v, ch, n, 1.0 / 255.0, |x| x as f32, &mut rgb, &mut alpha),
        Pixels::U16(v) => fill(v, ch, n, 1.0 / 65535.0, |x| x as f32, &mut rgb, &mut alpha),
    }
    (rgb, alpha)
}

/// Inverse of [`to_planar_rgb`]: clamps to 0..=1 and rounds to the nearest 8- or 16-bit value.
/// `gray` folds RGB back to one channel (BT.601 luma). Panics if the slices are too short.
pub fn from_planar_rgb(w: u32, h: u32, rgb: &[f32], alpha: Option<&[f32]>, bit_depth: u8, gray: bool, meta: Metadata) -> Image {
    let n = w as usize * h as usize;
    assert!(rgb.len() >= 3 * n, "rgb planes need {} floats, got {}", 3 * n, rgb.len());
    if let Some(a) = alpha {
        assert!(a.len() >= n, "alpha plane needs {n} floats, got {}", a.len());
    }
    let depth: u8 = if bit_depth > 8 { 16 } else { 8 };
    let maxv = if depth == 16 { 65535.0f32 } else { 255.0 };
    let q = |v: f32| -> u16 {
        if v.is_nan() {
            0
        } else {
            (v.clamp(0.0, 1.0) * maxv + 0.5).floor() as u16
        }
    };
    let ch = (if gray { 1 } else { 3 }) + alpha.is_some() as usize;
    let (r, g, b) = (&rgb[..n], &rgb[n..2 * n], &rgb[2 * n..3 * n]);
    let mut out: Vec<u16> = Vec::with_capacity(n * ch);
    for i in 0..n {
        if gray {
            out.push(q(0.299 * r[i] + 0.587 * g[i] + 0.114 * b[i]));
        } else {
            out.extend_from_slice(&[q(r[i]), q(g[i]), q(b[i])]);
        }
        if let Some(a) = alpha {
            out.push(q(a[i]));
        }
    }
    let data = if depth == 16 { Pixels::U16(out) } else { Pixels::U8(out.into_iter().map(|v| v as u8).collect()) };
    Image { width: w, height: h, channels: ch as u8, bit_depth: depth, data, meta }
}
