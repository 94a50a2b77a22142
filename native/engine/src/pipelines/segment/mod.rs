//! Background removal (salient-object segmentation, U²-Net): the photo in, its alpha mask at full
//! resolution out, and the subject on a transparent background.
//!
//! - `refine.rs`: the edge refinement of the network's coarse mask, guided by the photo (a colour
//!   guided filter; chosen and measured in docs/segmentation.md)
//! - here: the pipeline on decoded, upright pixels. [`alpha_mask`] runs the network and the
//!   refinement, [`network_map`] is the network's 320x320 map alone (tested against onnxruntime's).
//!   The bytes-in, bytes-out path (decode, EXIF orientation, limits, encode) is
//!   [`crate::segment::segment`], as photo.rs is the photo models'.
//!
//! Pre- and post-processing as rembg does: the photo as 8-bit RGB (alpha dropped, grey replicated,
//! 16-bit rounded to 8) resized to 320x320 with the crate's resampler ([`crate::resample::resize`]:
//! Lanczos3 with its window stretched when downscaling, as PIL's LANCZOS that rembg uses; area
//! averaging from 3x down; pixel-centre aligned), `x / max(x)` over the whole image, ImageNet mean
//! (0.485, 0.456, 0.406) and std (0.229, 0.224, 0.225); the network's first output (the fused
//! sigmoid map) min-max normalised. Then, unlike rembg (8 bits, Lanczos back), the float map is
//! resized to the photo bilinearly (half-pixel centres, edges clamped: PIL's BILINEAR upscale, the
//! measuring script's `upsample_bilinear`) and refined by [`refine::guided_filter`].
//!
//! No catalog entry yet: the models are named here ([`MODELS`]: `seg/<name>.onnx` in the model
//! dir, loaded once per runtime by [`Runtime::network`] through lucent_models' ONNX reader).
//! On a GPU backend the net runs with f32 storage ([`Storage::F32`] through
//! [`Runtime::network_with`]): with f16 storage u2netp's map drifts to 8.5e-2 from onnxruntime's
//! (docs/models.md), with f32 it stays within 1e-3 of the CPU backend's (docs/segmentation.md).
pub mod refine;

use crate::raster::{Raster, RasterRef, SamplesRef};
use crate::resample::resize;
use crate::runtime::Runtime;
use lucent_core::backend::Storage;
use lucent_core::{Cancel, Code, Error, Result, Tensor};
use refine::{guided_filter_threads, Guide, GuidedParams, MAP_SIDE};

/// The segmentation models: name -> network file below the model dir.
pub const MODELS: [(&str, &str); 2] = [("u2netp", "seg/u2netp.onnx"), ("u2net", "seg/u2net.onnx")];

/// ImageNet normalisation (rembg's).
const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const STD: [f32; 3] = [0.229, 0.224, 0.225];

/// The network file of model `name` (`unknown_model` for any other name: no paths from callers).
pub fn model_stem(name: &str) -> Result<&'static str> {
    MODELS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| *s)
        .ok_or_else(|| Error::new(Code::UnknownModel, format!("segmentation model '{name}' does not exist (expected u2netp or u2net)")))
}

/// The mask at full resolution and the RGBA image, decoded (no encoding).
#[derive(Debug, Clone)]
pub struct Segmented {
    /// w x h alpha in [0, 1].
    pub alpha: Vec<f32>,
    /// w x h x 4: the photo's RGB (8-bit) with alpha = round(255 * alpha).
    pub rgba: Raster,
    /// w x h: the mask as 8 bits, round(255 * alpha) (the RGBA image's alpha).
    pub mask: Vec<u8>,
}

/// The photo as interleaved 8-bit RGB (alpha dropped, grey replicated, 16-bit rounded).
pub fn rgb8(src: RasterRef<'_>) -> Vec<u8> {
    let n = src.width * src.height;
    if let SamplesRef::U8(v) = src.samples {
        // 8 bits in: the samples as they are (what the per-pixel path below gives, bit for bit).
        let v = &v[..n * src.channels];
        match src.channels {
            3 => return v.to_vec(),
            1 | 2 => return v.chunks_exact(src.channels).flat_map(|p| [p[0]; 3]).collect(),
            c => return v.chunks_exact(c).flat_map(|p| [p[0], p[1], p[2]]).collect(),
        }
    }
    let mut v = Vec::with_capacity(n * 3);
    for y in 0..src.height {
        for x in 0..src.width {
            for c in src.rgb(x, y) {
                v.push((c * 255.0).round().clamp(0.0, 255.0) as u8);
            }
        }
    }
    v
}

/// The network's first output on `src` (any size), 320x320 row-major, before min-max: the photo
/// resized and normalised as the module doc says.
pub fn network_map(rt: &Runtime, stem: &str, src: RasterRef<'_>, cancel: &Cancel) -> Result<Vec<f32>> {
    network_map_rgb8(rt, stem, &rgb8(src), src.width, src.height, cancel)
}

/// [`network_map`] of a `w` x `h` photo given as interleaved 8-bit RGB ([`rgb8`]).
pub fn network_map_rgb8(rt: &Runtime, stem: &str, rgb: &[u8], w: usize, h: usize, cancel: &Cancel) -> Result<Vec<f32>> {
    let small = if (w, h) == (MAP_SIDE, MAP_SIDE) {
        rgb.to_vec()
    } else {
        let r = resize(RasterRef::new_u8(w, h, 3, rgb)?, MAP_SIDE, MAP_SIDE, cancel)?;
        match r.samples {
            crate::raster::Samples::U8(v) => v,
            crate::raster::Samples::U16(_) => return Err(Error::new(Code::Internal, "8-bit resize gave 16 bits")),
        }
    };
    let n = MAP_SIDE * MAP_SIDE;
    let max = small.iter().copied().max().unwrap_or(0) as f32 / 255.0;
    let max = if max > 0.0 { max } else { 1.0 };
    let mut data = vec![0f32; 3 * n];
    for (i, p) in small.chunks_exact(3).enumerate() {
        for c in 0..3 {
            data[c * n + i] = ((p[c] as f32 / 255.0) / max - MEAN[c]) / STD[c];
        }
    }
    let x = Tensor::from_vec(3, MAP_SIDE, MAP_SIDE, data);
    cancel.check()?;
    let l = rt.network_with(stem, Storage::F32)?;
    let out_blob = l.net.blob("out0").unwrap_or(l.out_blob);
    let mut outs = l.prepared.run(&[(l.in_blob, &x)], &[out_blob], cancel)?;
    let y = outs.pop().ok_or_else(|| Error::new(Code::Internal, format!("{stem}: no output")))?;
    if (y.h, y.w) != (MAP_SIDE, MAP_SIDE) || y.c < 1 {
        return Err(Error::new(Code::ModelInvalid, format!("{stem}: output {}x{}x{}, expected 1x{MAP_SIDE}x{MAP_SIDE}", y.c, y.h, y.w)));
    }
    let mut m = y.data;
    m.truncate(n);
    Ok(m)
}

/// Min-max normalised map (rembg's); a constant or non-finite map is clamped to [0, 1] instead.
pub fn min_max(m: &mut [f32]) {
    let (lo, hi) = m.iter().filter(|v| v.is_finite()).fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
    let span = hi - lo;
    for v in m.iter_mut() {
        let f = if v.is_finite() { *v } else { 0.0 };
        *v = if span > 1e-12 && span.is_finite() { (f - lo) / span } else { f.clamp(0.0, 1.0) };
    }
}

/// `m` (`mw` x `mh`) resized to `w` x `h` bilinearly: half-pixel centres, edges clamped.
pub fn upsample_bilinear(m: &[f32], mw: usize, mh: usize, w: usize, h: usize) -> Vec<f32> {
    let axis = |n_in: usize, n_out: usize| -> Vec<(usize, usize, f32)> {
        let s = n_in as f64 / n_out as f64;
        (0..n_out)
            .map(|o| {
                let x = ((o as f64 + 0.5) * s - 0.5).clamp(0.0, (n_in - 1) as f64);
                let i0 = x.floor() as usize;
                let i1 = (i0 + 1).min(n_in - 1);
                (i0, i1, (x - i0 as f64) as f32)
            })
            .collect()
    };
    let (ax, ay) = (axis(mw, w), axis(mh, h));
    let mut out = Vec::with_capacity(w * h);
    let mut row = vec![0f32; mw];
    for &(y0, y1, fy) in &ay {
        for (x, r) in row.iter_mut().enumerate() {
            *r = m[y0 * mw + x] * (1.0 - fy) + m[y1 * mw + x] * fy;
        }
        out.extend(ax.iter().map(|&(x0, x1, fx)| row[x0] * (1.0 - fx) + row[x1] * fx));
    }
    out
}

/// The refined alpha mask of `src` (upright pixels) at its own size, and the RGBA image. The meter
/// is charged the photo's pixels before the network runs.
pub fn alpha_mask(rt: &Runtime, model: &str, src: RasterRef<'_>, cancel: &Cancel) -> Result<Segmented> {
    alpha_mask_progress(rt, model, src, cancel, &|_| {})
}

/// Progress points of [`alpha_mask_progress`] (0..=100 of the whole bytes-in, bytes-out call,
/// [`crate::segment::segment_progress`]): the meter charged and the photo as 8 bits, the network's
/// map, the refinement. The encodes that follow report the rest.
pub const PROGRESS_METERED: u32 = 10;
pub const PROGRESS_NETWORK: u32 = 60;
pub const PROGRESS_REFINED: u32 = 80;

/// [`alpha_mask`] reporting its stages to `progress` ([`PROGRESS_METERED`], [`PROGRESS_NETWORK`],
/// [`PROGRESS_REFINED`]; nothing before the meter is charged, so a refused photo reports none).
pub fn alpha_mask_progress(rt: &Runtime, model: &str, src: RasterRef<'_>, cancel: &Cancel, progress: &dyn Fn(u32)) -> Result<Segmented> {
    let stem = model_stem(model)?;
    let (w, h) = (src.width, src.height);
    if w == 0 || h == 0 {
        return Err(Error::new(Code::InvalidArgument, format!("an image of {w}x{h} pixels has nothing to segment")));
    }
    cancel.charge(w as u64 * h as u64, &format!("segmentation {model} ({w}x{h})"))?;
    let rgb = rgb8(src);
    progress(PROGRESS_METERED);
    let mut map = network_map_rgb8(rt, stem, &rgb, w, h, cancel)?;
    progress(PROGRESS_NETWORK);
    min_max(&mut map);
    cancel.check()?;
    let coarse = upsample_bilinear(&map, MAP_SIDE, MAP_SIDE, w, h);
    let threads = runtime_threads(rt);
    let alpha = guided_filter_threads(Guide::Rgb8(&rgb), &coarse, w, h, GuidedParams::for_mask(w, h), threads)?;
    drop(coarse);
    progress(PROGRESS_REFINED);
    cancel.check()?;
    let (rgba, mask) = rgba_and_mask(&rgb, &alpha, w, if w * h >= PAR_MIN_PIXELS { threads } else { 1 });
    Ok(Segmented { alpha, rgba: Raster::from_u8(w, h, 4, rgba)?, mask })
}

/// The threads the runtime computes on: the CPU backend's workers, all cores for the GPU's (its
/// host side). The guided filter, the RGBA pass and the two encodes use as many.
pub fn runtime_threads(rt: &Runtime) -> usize {
    rt.info().threads.unwrap_or_else(|| std::thread::available_parallelism().map(|t| t.get()).unwrap_or(1)).max(1)
}

/// Below this many pixels the RGBA pass runs on the calling thread only.
const PAR_MIN_PIXELS: usize = 1 << 18;

/// The RGBA image (`rgb` with alpha = round(255 * alpha)) and the 8-bit mask, in one pass over
/// bands of rows on `threads` threads (`w` pixels a row; the result does not depend on `threads`).
pub fn rgba_and_mask(rgb: &[u8], alpha: &[f32], w: usize, threads: usize) -> (Vec<u8>, Vec<u8>) {
    let n = alpha.len();
    let (mut rgba, mut mask) = (vec![0u8; n * 4], vec![0u8; n]);
    let fill = |rgb: &[u8], alpha: &[f32], rgba: &mut [u8], mask: &mut [u8]| {
        for (((p, a), o), m) in rgb.chunks_exact(3).zip(alpha).zip(rgba.chunks_exact_mut(4)).zip(mask.iter_mut()) {
            let a = to_u8(*a);
            o.copy_from_slice(&[p[0], p[1], p[2], a]);
            *m = a;
        }
    };
    let rows = n / w.max(1);
    let band = rows.div_ceil(threads.max(1)).max(1) * w.max(1);
    if threads <= 1 || n <= band {
        fill(rgb, alpha, &mut rgba, &mut mask);
    } else {
        std::thread::scope(|sc| {
            let parts = rgb.chunks(band * 3).zip(alpha.chunks(band)).zip(rgba.chunks_mut(band * 4)).zip(mask.chunks_mut(band));
            for (((c, a), o), m) in parts {
                let fill = &fill;
                sc.spawn(move || fill(c, a, o, m));
            }
        });
    }
    (rgba, mask)
}

/// An alpha value as 8 bits: round(255 * a), clamped.
pub fn to_u8(a: f32) -> u8 {
    (a * 255.0).round().clamp(0.0, 255.0) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 8-bit fast paths of [`rgb8`] give the per-pixel path's bytes (every sample value, 1-4
    /// channels); the threaded RGBA pass gives the one-thread bytes.
    #[test]
    fn fast_paths_match_the_per_pixel_path() {
        let (w, h) = (37, 29);
        let data: Vec<u8> = (0..w * h * 4).map(|i| ((i * 7919 + i / 3) % 256) as u8).collect();
        for c in 1..=4 {
            let src = RasterRef::new_u8(w, h, c, &data[..w * h * c]).unwrap();
            let slow: Vec<u8> = (0..h).flat_map(|y| (0..w).map(move |x| (x, y))).flat_map(|(x, y)| src.rgb(x, y)).map(|v| (v * 255.0).round().clamp(0.0, 255.0) as u8).collect();
            assert_eq!(rgb8(src), slow, "{c} channels");
        }
        let rgb = rgb8(RasterRef::new_u8(w, h, 3, &data[..w * h * 3]).unwrap());
        let alpha: Vec<f32> = (0..w * h).map(|i| (i % 300) as f32 / 280.0 - 0.03).collect();
        let one = rgba_and_mask(&rgb, &alpha, w, 1);
        for t in [2, 3, 8, 64] {
            assert_eq!(rgba_and_mask(&rgb, &alpha, w, t), one, "{t} threads");
        }
        assert!(one.1.iter().zip(&alpha).all(|(m, a)| *m == to_u8(*a)));
        assert!(one.0.chunks_exact(4).zip(rgb.chunks_exact(3)).zip(&one.1).all(|((o, p), m)| o[..3] == *p && o[3] == *m));
    }
}
