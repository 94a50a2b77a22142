//! The photo path: decode (with the model's limits) -> the model's pipeline -> encode, with the
//! API's EXIF / DPI rules. Codec errors map onto the core's stable codes. [`crate::Engine::enhance`]
//! is its entry point.

use crate::catalog::{self, Category, Kind, Limits};
use crate::orient::{apply_orientation, reset_exif_orientation};
use crate::pipelines::{self, custom::CustomSr, Enhancer};
use crate::raster::{Raster, Samples};
use crate::resample::resize;
use crate::runtime::Runtime;
use lucent_codec::{CodecError, CodecErrorCode, EncodeOptions, Format, Image, Pixels};
use lucent_core::{Cancel, Code, Error, Result};
use std::time::Instant;

#[derive(Debug, Clone, Default)]
pub struct EnhanceOptions {
    /// Photo catalog name.
    pub model: String,
    /// Output format / extension, with or without the dot ("png", ".jpg").
    pub format: String,
    /// Keep EXIF.
    pub exif: bool,
    /// Write this DPI (honoured for enhance models, ignored for generative ones). None: keep input's.
    pub dpi: Option<f64>,
    /// JPEG/HEIF quality 1..=100 (None: codec default).
    pub quality: Option<u8>,
    /// Output size in pixels (upright, after EXIF orientation): the model runs at its own scale,
    /// then the result is resampled to this size ([`crate::resample::resize`]). One side alone
    /// keeps the aspect ratio; neither: the model's size. Each 1..=[`MAX_TARGET_SIDE`].
    pub target_width: Option<u32>,
    pub target_height: Option<u32>,
    /// Bring your own model: run this network file instead of a catalog model (`model` then only
    /// names it in messages). None: the catalog model `model`.
    pub network: Option<NetworkFile>,
}

/// An operator's own network for one call (pipelines/custom.rs): the file, the side multiple its
/// input needs, and the photo limits the caller gives it (the server's registry decides them).
#[derive(Debug, Clone)]
pub struct NetworkFile {
    /// A `.pth` / `.pt` / `.ckpt` / `.safetensors` file, or an ncnn stem (`x` for `x.param` + `x.bin`).
    pub path: String,
    /// Input sides are padded to a multiple of this per tile (1: none).
    pub multiple: usize,
    pub max_in_mp: u32,
    pub max_out_mp: u32,
}

/// Largest output side `target_width` / `target_height` may ask for (JPEG's limit).
pub const MAX_TARGET_SIDE: u32 = 65_535;

/// The output size for a model output of `w` x `h` and the requested sides (one side alone keeps
/// the aspect ratio, rounded, at least 1).
pub fn target_size(w: usize, h: usize, tw: Option<u32>, th: Option<u32>) -> (usize, usize) {
    let keep = |side: u32, num: usize, den: usize| ((side as f64 * num as f64 / den as f64).round() as usize).max(1);
    match (tw, th) {
        (Some(tw), Some(th)) => (tw as usize, th as usize),
        (Some(tw), None) => (tw as usize, keep(tw, h, w)),
        (None, Some(th)) => (keep(th, w, h), th as usize),
        (None, None) => (w, h),
    }
}

#[derive(Debug, Clone)]
pub struct EnhanceOutput {
    pub data: Vec<u8>,
    pub width: u32,
    pub height: u32,
    /// Canonical extension of the output format, without the dot ("png", "jpg" ...).
    pub format: &'static str,
    /// Whole call, and its parts.
    pub ms: f64,
    pub decode_ms: f64,
    pub run_ms: f64,
    pub encode_ms: f64,
}

pub fn map_codec(e: CodecError) -> Error {
    let code = match e.code {
        CodecErrorCode::UnsupportedFormat => Code::UnsupportedFormat,
        CodecErrorCode::DecodeFailed => Code::DecodeFailed,
        CodecErrorCode::EncodeFailed => Code::EncodeFailed,
        CodecErrorCode::ImageTooLarge => Code::ImageTooLarge,
    };
    Error::new(code, e.message)
}

pub fn parse_format(ext: &str) -> Result<Format> {
    let e = ext.trim().trim_start_matches('.');
    Format::from_extension(e).ok_or_else(|| Error::new(Code::UnsupportedFormat, format!("output format '{ext}' is not supported")))
}

pub fn image_to_raster(img: Image) -> Result<(Raster, lucent_codec::Metadata)> {
    let (w, h, c) = (img.width as usize, img.height as usize, img.channels as usize);
    let r = match img.data {
        Pixels::U8(v) => Raster::from_u8(w, h, c, v)?,
        Pixels::U16(v) => Raster::from_u16(w, h, c, v)?,
    };
    Ok((r, img.meta))
}

pub fn raster_to_image(r: Raster, meta: lucent_codec::Metadata) -> Image {
    let (w, h, c) = (r.width as u32, r.height as u32, r.channels as u8);
    let mut img = match r.samples {
        Samples::U8(v) => Image::from_u8(w, h, c, v),
        Samples::U16(v) => Image::from_u16(w, h, c, v),
    };
    img.meta = meta;
    img
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// Decode `bytes`, run the photo model, encode. `progress` gets 0..=100.
pub fn enhance(rt: &Runtime, bytes: &[u8], opts: &EnhanceOptions, cancel: &Cancel, progress: &dyn Fn(u32)) -> Result<EnhanceOutput> {
    let t0 = Instant::now();
    let (pipeline, name, (max_in_mp, max_out_mp), category, s): (Box<dyn Enhancer>, &str, _, _, _) = match &opts.network {
        None => {
            let model = catalog::lookup(Kind::Photo, &opts.model)?;
            let Limits::Photo { max_in_mp, max_out_mp } = model.limits() else {
                return Err(Error::new(Code::Internal, format!("photo model {} has no photo limits", model.name)));
            };
            (pipelines::for_model(model)?, model.name, (max_in_mp, max_out_mp), model.category, model.scale as u64)
        }
        Some(n) => {
            let p = CustomSr::open(rt, &n.path, n.multiple)?;
            let s = p.scale() as u64;
            (Box::new(p), opts.model.as_str(), (n.max_in_mp, n.max_out_mp), Category::Enhance, s)
        }
    };
    let format = parse_format(&opts.format)?;
    if let Some(d) = opts.dpi {
        if !(d.is_finite() && d > 0.0 && d <= 1_000_000.0) {
            return Err(Error::new(Code::InvalidArgument, format!("DPI {d} is not a positive number")));
        }
    }
    for (name, v) in [("target_width", opts.target_width), ("target_height", opts.target_height)] {
        if let Some(v) = v {
            if !(1..=MAX_TARGET_SIDE).contains(&v) {
                return Err(Error::new(Code::InvalidArgument, format!("{name} {v}: expected 1..{MAX_TARGET_SIDE}")));
            }
        }
    }
    cancel.check()?;

    // The model's limits, checked on the header before any pixel is decoded.
    let (max_in, max_out) = (max_in_mp as u64 * 1_000_000, max_out_mp as u64 * 1_000_000);
    let p = lucent_codec::probe(bytes).map_err(map_codec)?;
    let in_px = p.width as u64 * p.height as u64;
    if in_px > max_in {
        return Err(Error::new(
            Code::ImageTooLarge,
            format!("input {}x{} is {:.1} MP, over the {} MP limit of {}", p.width, p.height, in_px as f64 / 1e6, max_in_mp, name),
        ));
    }
    if in_px * s * s > max_out {
        return Err(Error::new(
            Code::ImageTooLarge,
            format!("output {}x{} would be over the {} MP limit of {}", p.width as u64 * s, p.height as u64 * s, max_out_mp, name),
        ));
    }
    let limits = lucent_codec::Limits { max_pixels: max_in, ..Default::default() };
    let td = Instant::now();
    let img = lucent_codec::decode(bytes, &limits).map_err(map_codec)?;
    let decode_ms = ms_since(td);
    let (src, mut meta) = image_to_raster(img)?;
    // EXIF orientation: turn the pixels upright, and say so in any EXIF kept.
    let src = match meta.orientation {
        Some(o) if (2..=8).contains(&o) => apply_orientation(&src, o)?,
        _ => src,
    };
    meta.orientation = None;
    if let Some(x) = meta.exif.as_mut() {
        reset_exif_orientation(x);
    }
    // The output size asked for, checked against the model's output limit before the model runs.
    let s = s as usize;
    let (tw, th) = target_size(src.width * s, src.height * s, opts.target_width, opts.target_height);
    if tw as u64 * th as u64 > max_out || tw > MAX_TARGET_SIDE as usize || th > MAX_TARGET_SIDE as usize {
        return Err(Error::new(
            Code::ImageTooLarge,
            format!("output {tw}x{th} is over the {max_out_mp} MP limit of {name} (or a side over {MAX_TARGET_SIDE})"),
        ));
    }
    progress(5);
    cancel.check()?;

    let tr = Instant::now();
    let mut on_step = |done: usize, total: usize| {
        progress(5 + (90 * done / total.max(1)) as u32);
    };
    let out = pipeline.run(rt, src.as_ref(), cancel, &mut on_step)?;
    drop(src);
    cancel.check()?;
    // Resampled to the size asked for (none asked: the model's output as it is).
    let (tw, th) = target_size(out.width, out.height, opts.target_width, opts.target_height);
    let out = if (out.width, out.height) != (tw, th) { resize(out.as_ref(), tw, th, cancel)? } else { out };
    let run_ms = ms_since(tr);

    let te = Instant::now();
    let (width, height) = (out.width as u32, out.height as u32);
    let img = raster_to_image(out, meta);
    let dpi = match category {
        Category::Enhance => opts.dpi,
        Category::Generative => None,
    };
    let eo = EncodeOptions {
        keep_exif: opts.exif,
        dpi,
        quality: opts.quality.unwrap_or(EncodeOptions::default().quality),
    };
    let data = lucent_codec::encode(&img, format, &eo).map_err(map_codec)?;
    let encode_ms = ms_since(te);
    progress(100);
    Ok(EnhanceOutput { data, width, height, format: format.extension(), ms: ms_since(t0), decode_ms, run_ms, encode_ms })
}
