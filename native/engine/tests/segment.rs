//! The segmentation pipeline (pipelines/segment) and its bytes path (segment.rs) with the real u2netp (`lucent models fetch
//! seg/u2netp`, into $LUCENT_MODEL_DIR or data/test-models; the tests skip without it, except under
//! CI, where `npm test` fetches `--all`):
//! - the 320x320 map equals onnxruntime's golden of native/models/tests/onnx (the same PNG, 0014.jpg
//!   resized by PIL's LANCZOS, scripts/onnx-goldens.py): within 1e-3 on its 4,096 sampled values;
//! - a real photo at its own size: the mask has the photo's size, the refined mask equals the plain
//!   bilinear map's sure parts exactly and stays near it elsewhere;
//! - EXIF orientation: a JPEG stored sideways gets the upright photo's mask;
//! - 1x1 and very wide / tall images give a result of their size (no panic); bad names and formats
//!   are errors with their codes.

mod common;
use common::exif_with_orientation;
use lucent_codec::{EncodeOptions, Format, Metadata};
use lucent_core::cpu::CpuBackend;
use lucent_engine::orient::apply_orientation;
use lucent_engine::photo::{image_to_raster, raster_to_image};
use lucent_engine::pipelines::segment::refine::{GuidedParams, SNAP_HI, SNAP_LO};
use lucent_engine::pipelines::segment::{alpha_mask, min_max, network_map, to_u8, upsample_bilinear};
use lucent_engine::segment::{segment, SegmentOptions};
use lucent_engine::{Cancel, Code, Engine, Raster, Samples};
use std::path::PathBuf;
use std::sync::Arc;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn model_dir() -> PathBuf {
    std::env::var_os("LUCENT_MODEL_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("data/test-models"))
}

fn photos() -> PathBuf {
    root().join("../shared/data/photos")
}

/// The engine on the CPU backend, or None (skip) where seg/u2netp.onnx is absent outside CI.
fn engine() -> Option<Engine> {
    let path = model_dir().join("seg/u2netp.onnx");
    if !path.exists() {
        assert!(std::env::var_os("CI").is_none(), "CI: {} missing (lucent models fetch --all)", path.display());
        eprintln!("SKIP: {} is absent (`lucent models fetch seg/u2netp`)", path.display());
        return None;
    }
    Some(Engine::with_backend(Arc::new(CpuBackend::new(Some(2))), &model_dir(), None).expect("engine"))
}

fn decode(bytes: &[u8]) -> Raster {
    image_to_raster(lucent_codec::decode(bytes, &Default::default()).expect("decode")).unwrap().0
}

fn encode(r: &Raster, f: Format, meta: Metadata, keep_exif: bool) -> Vec<u8> {
    lucent_codec::encode(&raster_to_image(r.clone(), meta), f, &EncodeOptions { keep_exif, dpi: None, quality: 95 }).unwrap()
}

fn u8s(r: &Raster) -> &[u8] {
    match &r.samples {
        Samples::U8(v) => v,
        Samples::U16(_) => panic!("8-bit expected"),
    }
}

fn opts() -> SegmentOptions {
    SegmentOptions { model: "u2netp".into(), format: "png".into() }
}

#[test]
fn map_matches_onnxruntime() {
    let Some(e) = engine() else { return };
    let dir = root().join("native/models/tests/onnx");
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("u2netp.json")).unwrap()).unwrap();
    let src = decode(&std::fs::read(dir.join("u2netp.in.png")).unwrap());
    assert_eq!((src.width, src.height), (320, 320));
    let map = network_map(e.runtime(), "seg/u2netp.onnx", src.as_ref(), &Cancel::new()).unwrap();
    let stride = meta["stride"].as_u64().unwrap() as usize;
    let want: Vec<f64> = meta["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(want.len(), map.len().div_ceil(stride));
    let err = map.iter().step_by(stride).zip(&want).map(|(&a, &b)| (a as f64 - b).abs()).fold(0.0, f64::max);
    let sum: f64 = map.iter().map(|&v| v as f64).sum();
    let mean_diff = (sum - meta["sum"].as_f64().unwrap()).abs() / map.len() as f64;
    eprintln!("u2netp map vs onnxruntime: max abs {err:.2e} over {} values, mean diff {mean_diff:.2e}", want.len());
    assert!(err < 1e-3, "max abs error {err}");
    assert!(mean_diff < 1e-4, "mean diff {mean_diff}");
}

/// Per pixel: min and max of `m` over the (2r+1)^2 window, clipped at the borders.
fn window_min_max(m: &[f32], w: usize, h: usize, r: usize) -> (Vec<f32>, Vec<f32>) {
    let pass = |src: &[f32], f: fn(f32, f32) -> f32, horizontal: bool| -> Vec<f32> {
        let mut out = vec![0f32; w * h];
        for y in 0..h {
            for x in 0..w {
                let (lo, hi) = if horizontal { (x.saturating_sub(r), (x + r).min(w - 1)) } else { (y.saturating_sub(r), (y + r).min(h - 1)) };
                let mut acc = src[y * w + x];
                for k in lo..=hi {
                    acc = f(acc, if horizontal { src[y * w + k] } else { src[k * w + x] });
                }
                out[y * w + x] = acc;
            }
        }
        out
    };
    let mn = pass(&pass(m, f32::min, true), f32::min, false);
    let mx = pass(&pass(m, f32::max, true), f32::max, false);
    (mn, mx)
}

#[test]
fn a_real_photo_at_its_own_size() {
    let Some(e) = engine() else { return };
    let bytes = std::fs::read(photos().join("0014.jpg")).expect("shared/data/photos");
    let src = decode(&bytes);
    let (w, h) = (src.width, src.height);
    let cancel = Cancel::new();
    let out = segment(e.runtime(), &bytes, &opts(), &cancel).unwrap();
    assert_eq!((out.width as usize, out.height as usize, out.format), (w, h, "png"));
    assert_eq!(cancel.work(), (w * h) as u64, "the meter counts the photo's pixels");
    let mask = decode(&out.mask);
    assert_eq!((mask.width, mask.height, mask.channels), (w, h, 1));
    let matted = decode(&out.matted);
    assert_eq!((matted.width, matted.height, matted.channels), (w, h, 4));
    // The matted image is the photo's RGB with alpha = the mask.
    let (m, a, s) = (u8s(&mask), u8s(&matted), u8s(&src));
    for i in 0..w * h {
        assert_eq!(a[4 * i + 3], m[i], "alpha = mask at {i}");
        assert_eq!(&a[4 * i..4 * i + 3], &s[3 * i..3 * i + 3], "RGB kept at {i}");
    }
    // The plain (unrefined) mask: the map min-max normalised, resized bilinearly.
    let mut map = network_map(e.runtime(), "seg/u2netp.onnx", src.as_ref(), &Cancel::new()).unwrap();
    min_max(&mut map);
    let coarse = upsample_bilinear(&map, 320, 320, w, h);
    let alpha = alpha_mask(e.runtime(), "u2netp", src.as_ref(), &Cancel::new()).unwrap().alpha;
    assert!(alpha.iter().zip(m).all(|(&x, &q)| to_u8(x) == q), "the PNG mask is round(255 alpha)");
    let r = GuidedParams::for_mask(w, h).radius;
    let (mn, mx) = window_min_max(&coarse, w, h, r);
    let (mut band, mut mae, mut inter, mut union) = (0usize, 0f64, 0usize, 0usize);
    for i in 0..w * h {
        if mn[i] >= SNAP_HI {
            assert_eq!(alpha[i], 1.0, "sure subject stays 1 at {i}");
        } else if mx[i] <= SNAP_LO {
            assert_eq!(alpha[i], 0.0, "sure background stays 0 at {i}");
        } else {
            band += 1;
        }
        mae += (alpha[i] - coarse[i]).abs() as f64;
        let (p, q) = (alpha[i] >= 0.5, coarse[i] >= 0.5);
        inter += (p && q) as usize;
        union += (p || q) as usize;
    }
    let mae = mae / (w * h) as f64;
    let iou = inter as f64 / union.max(1) as f64;
    let fg = coarse.iter().filter(|&&v| v >= 0.5).count() as f64 / (w * h) as f64;
    eprintln!("{w}x{h}: r {r}, uncertain band {:.1} %, subject {:.1} %, MAE refined vs plain {mae:.4}, IoU {iou:.4}", 100.0 * band as f64 / (w * h) as f64, 100.0 * fg);
    assert!(fg > 0.02 && fg < 0.98, "the net found something: {fg}");
    assert!(band > 0, "an edge to refine");
    // The refinement only moves the uncertain band, and not far.
    assert!(mae < 0.03, "MAE {mae}");
    assert!(iou > 0.95, "IoU {iou}");
}

#[test]
fn exif_orientation_gives_the_upright_mask() {
    let Some(e) = engine() else { return };
    let full = decode(&std::fs::read(photos().join("0014.jpg")).expect("shared/data/photos"));
    // a 179x120 crop, stored sideways: orientation 6 (turn 90 degrees clockwise to display)
    let (w, h) = (full.width, 120);
    let stored = Raster::from_u8(w, h, 3, u8s(&full)[..w * h * 3].to_vec()).unwrap();
    let meta = Metadata { exif: Some(exif_with_orientation(6)), orientation: Some(6), ..Default::default() };
    let jpg = encode(&stored, Format::Jpeg, meta, true);
    let decoded = lucent_codec::decode(&jpg, &Default::default()).unwrap();
    assert_eq!(decoded.meta.orientation, Some(6), "the test input carries orientation 6");
    let upright = apply_orientation(&image_to_raster(decoded).unwrap().0, 6).unwrap();
    assert_eq!((upright.width, upright.height), (h, w));
    let out = segment(e.runtime(), &jpg, &opts(), &Cancel::new()).unwrap();
    assert_eq!((out.width as usize, out.height as usize), (h, w), "upright: width and height swapped");
    let mask = decode(&out.mask);
    let want = alpha_mask(e.runtime(), "u2netp", upright.as_ref(), &Cancel::new()).unwrap();
    assert!(want.alpha.iter().zip(u8s(&mask)).all(|(&a, &q)| to_u8(a) == q), "the mask of the upright photo");
    let matted = decode(&out.matted);
    assert_eq!(u8s(&matted), u8s(&want.rgba));
    // and not the sideways photo's mask turned: the net saw the upright photo
    let sideways = alpha_mask(e.runtime(), "u2netp", decode(&jpg).as_ref(), &Cancel::new()).unwrap();
    let turned = apply_orientation(&Raster::from_u8(w, h, 1, sideways.alpha.iter().map(|&a| to_u8(a)).collect()).unwrap(), 6).unwrap();
    assert_ne!(u8s(&turned), u8s(&mask));
}


#[test]
fn tiny_and_very_wide_images() {
    let Some(e) = engine() else { return };
    for (w, h, c) in [(1usize, 1usize, 3usize), (1, 1, 1), (4000, 1, 3), (1, 3000, 4), (6000, 2, 2), (2, 2, 3)] {
        let v: Vec<u8> = (0..w * h * c).map(|i| (i * 37 % 251) as u8).collect();
        let png = encode(&Raster::from_u8(w, h, c, v).unwrap(), Format::Png, Metadata::default(), false);
        let out = segment(e.runtime(), &png, &opts(), &Cancel::new()).unwrap_or_else(|err| panic!("{w}x{h}x{c}: {err:?}"));
        assert_eq!((out.width as usize, out.height as usize), (w, h));
        let mask = decode(&out.mask);
        assert_eq!((mask.width, mask.height, mask.channels), (w, h, 1));
    }
    // WebP keeps the alpha
    let png = encode(&Raster::from_u8(3, 2, 3, vec![200; 18]).unwrap(), Format::Png, Metadata::default(), false);
    let out = segment(e.runtime(), &png, &SegmentOptions { model: "u2netp".into(), format: ".webp".into() }, &Cancel::new()).unwrap();
    assert_eq!(out.format, "webp");
    assert_eq!(decode(&out.matted).channels, 4);
}

#[test]
fn bad_requests_are_errors_with_codes() {
    let png = encode(&Raster::from_u8(8, 8, 3, vec![9; 192]).unwrap(), Format::Png, Metadata::default(), false);
    // these need no model file: an empty model dir
    let dir = std::env::temp_dir().join(format!("lucent-seg-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let e = Engine::with_backend(Arc::new(CpuBackend::new(Some(1))), &dir, None).unwrap();
    let code = |o: SegmentOptions, b: &[u8]| segment(e.runtime(), b, &o, &Cancel::new()).unwrap_err().code;
    assert_eq!(code(SegmentOptions { model: "../sr/x".into(), format: "png".into() }, &png), Code::UnknownModel);
    assert_eq!(code(SegmentOptions { model: "u2netp".into(), format: "jpg".into() }, &png), Code::UnsupportedFormat);
    assert_eq!(code(SegmentOptions { model: "u2netp".into(), format: "exe".into() }, &png), Code::UnsupportedFormat);
    assert_eq!(code(opts(), b"not an image"), Code::UnsupportedFormat);
    assert_eq!(code(opts(), &png), Code::ModelMissing, "seg/u2netp.onnx not in the model dir");
    // the meter stops the run before the network
    let c = Cancel::with_budget(Some(10));
    assert_eq!(segment(e.runtime(), &png, &opts(), &c).unwrap_err().code, Code::BudgetExceeded);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A 12 MP photo end to end (decode, u2netp, refinement, both encodes) on the CPU backend, 2
/// threads: `cargo test --release -p lucent-engine --test segment -- --ignored --nocapture`.
#[test]
#[ignore]
fn speed_12_mp() {
    let Some(e) = engine() else { return };
    let small = decode(&std::fs::read(photos().join("0014.jpg")).expect("shared/data/photos"));
    let (w, h) = (4000usize, 3000usize);
    let s = u8s(&small);
    let mut v = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        for x in 0..w {
            let i = ((y * small.height / h) * small.width + x * small.width / w) * 3;
            v.extend_from_slice(&s[i..i + 3]);
        }
    }
    let jpg = encode(&Raster::from_u8(w, h, 3, v).unwrap(), Format::Jpeg, Metadata::default(), false);
    let t = std::time::Instant::now();
    let out = segment(e.runtime(), &jpg, &opts(), &Cancel::new()).unwrap();
    eprintln!("12 MP end to end: {:.2} s (network + refinement {:.2} s)", t.elapsed().as_secs_f64(), out.run_ms / 1000.0);
    assert_eq!((out.width, out.height), (w as u32, h as u32));
}
