//! The segmentation path (background removal): decode (the photo path's limits on the header,
//! EXIF orientation) -> [`crate::pipelines::segment::alpha_mask`] (U²-Net + the edge refinement)
//! -> encode the subject on a transparent background and the grey mask (the two encodes overlap).
//! As photo.rs is for the photo models; kept apart from the pipeline so that the pipelines never
//! reach back into a path.

use crate::orient::apply_orientation;
use crate::photo::{image_to_raster, map_codec, parse_format, raster_to_image};
use crate::pipelines::segment::{alpha_mask_progress, model_stem, runtime_threads};
use crate::raster::Raster;
use crate::runtime::Runtime;
use lucent_codec::{EncodeOptions, Format, PngDeflate};
use lucent_core::{Cancel, Code, Error, Result};
use std::time::Instant;

/// Largest input (megapixels), as the catalog's photo enhance models.
pub const MAX_IN_MP: u32 = 70;

#[derive(Debug, Clone, Default)]
pub struct SegmentOptions {
    /// `u2netp` or `u2net`.
    pub model: String,
    /// Format of the matted image (with or without the dot; "" = png). The mask is always PNG.
    /// A format without alpha (jpg, bmp) is refused: the matted image is RGBA.
    pub format: String,
}

#[derive(Debug, Clone)]
pub struct SegmentOutput {
    /// The photo (upright, 8-bit RGB) with alpha = the mask, encoded in the format asked for.
    pub matted: Vec<u8>,
    /// The mask as 8-bit grey PNG, `round(255 * alpha)`.
    pub mask: Vec<u8>,
    pub width: u32,
    pub height: u32,
    /// Canonical extension of `matted`'s format.
    pub format: &'static str,
    pub ms: f64,
    pub run_ms: f64,
}

/// The PNGs' deflate: fdeflate's fast mode, on the bench's 12 MP photo 13x faster than the other
/// paths' zlib level 3 and smaller (matted RGBA 21.35 MB against 22.14, mask 0.72 against 0.80;
/// docs/segmentation.md "Speed").
const PNG: PngDeflate = PngDeflate::Fast;

/// Progress after the mask's PNG is encoded (the matted image's encode is the last stage: 100).
pub const PROGRESS_MASK_ENCODED: u32 = 90;

/// Decode `bytes` (the photo path's limits: [`MAX_IN_MP`] on the header, before any pixel is
/// decoded), turn it upright (EXIF orientation), segment, encode the matted image and the mask.
pub fn segment(rt: &Runtime, bytes: &[u8], opts: &SegmentOptions, cancel: &Cancel) -> Result<SegmentOutput> {
    segment_progress(rt, bytes, opts, cancel, &|_| {})
}

/// [`segment`] reporting its stages to `progress` (0..=100, rising): the meter charged after the
/// decode (10), the network (60), the refinement (80), the mask encoded (90), the matted image
/// encoded (100). A photo refused before the meter is charged (bad format, too large, does not
/// decode, over budget) reports nothing: its job ends at 0 % (server/jobs/refund.ts).
pub fn segment_progress(rt: &Runtime, bytes: &[u8], opts: &SegmentOptions, cancel: &Cancel, progress: &dyn Fn(u32)) -> Result<SegmentOutput> {
    let t0 = Instant::now();
    model_stem(&opts.model)?;
    let format = if opts.format.trim().is_empty() { Format::Png } else { parse_format(&opts.format)? };
    if matches!(format, Format::Jpeg | Format::Bmp) {
        return Err(Error::new(Code::UnsupportedFormat, format!("{}: the matted image has alpha (png, webp, tiff, tga, heif)", format.extension())));
    }
    let p = lucent_codec::probe(bytes).map_err(map_codec)?;
    let max_in = MAX_IN_MP as u64 * 1_000_000;
    let in_px = p.width as u64 * p.height as u64;
    if in_px > max_in {
        return Err(Error::new(
            Code::ImageTooLarge,
            format!("input {}x{} is {:.1} MP, over the {} MP limit of {}", p.width, p.height, in_px as f64 / 1e6, MAX_IN_MP, opts.model),
        ));
    }
    let img = lucent_codec::decode(bytes, &lucent_codec::Limits { max_pixels: max_in, ..Default::default() }).map_err(map_codec)?;
    let (src, mut meta) = image_to_raster(img)?;
    let src = match meta.orientation {
        Some(o) if (2..=8).contains(&o) => apply_orientation(&src, o)?,
        _ => src,
    };
    meta.orientation = None;
    meta.exif = None;
    cancel.check()?;
    let tr = Instant::now();
    let seg = alpha_mask_progress(rt, &opts.model, src.as_ref(), cancel, progress)?;
    drop(src);
    let run_ms = tr.elapsed().as_secs_f64() * 1000.0;
    let (w, h) = (seg.rgba.width, seg.rgba.height);
    let eo = EncodeOptions::default();
    let mask_img = raster_to_image(Raster::from_u8(w, h, 1, seg.mask)?, meta.clone());
    drop(seg.alpha);
    let matted_img = raster_to_image(seg.rgba, meta);
    let encode_matted = || lucent_codec::encode_with_png(&matted_img, format, &eo, PNG).map_err(map_codec);
    // The two encodes overlap (the matted image on a second thread) unless the runtime computes on
    // one thread; either way the mask is reported first (90), the matted image last (100).
    let (mask, matted) = if runtime_threads(rt) > 1 {
        std::thread::scope(|sc| {
            let matted = sc.spawn(encode_matted);
            let mask = lucent_codec::encode_with_png(&mask_img, Format::Png, &eo, PNG).map_err(map_codec);
            if mask.is_ok() {
                progress(PROGRESS_MASK_ENCODED);
            }
            let matted = matted.join().map_err(|_| Error::new(Code::Internal, "the matted image's encode panicked"))?;
            Ok::<_, Error>((mask?, matted))
        })?
    } else {
        let mask = lucent_codec::encode_with_png(&mask_img, Format::Png, &eo, PNG).map_err(map_codec)?;
        progress(PROGRESS_MASK_ENCODED);
        cancel.check()?;
        (mask, encode_matted())
    };
    drop((mask_img, matted_img));
    cancel.check()?;
    let matted = matted?;
    progress(100);
    Ok(SegmentOutput { matted, mask, width: w as u32, height: h as u32, format: format.extension(), ms: t0.elapsed().as_secs_f64() * 1000.0, run_ms })
}
