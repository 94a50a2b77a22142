//! Face quality of the video face models, before/after a change of their face style (not a test:
//! prints figures).
//!
//!   cargo run --release -p lucent-engine --example face_eval -- [--models a,b] [--n N] [--variant SPEC]...
//!
//! Inputs, from ../shared/data/faces (reference = the picture itself, degraded input):
//! - cropped/*.png (12 aligned 512 px faces): reference = the face at 128 x scale px (Catmull-Rom,
//!   antialiased), input = the face at 128 px; for a 1x model the input is also blurred (64 px and
//!   back up), so there is something to restore;
//! - whole/* (4 photos): reference = the photo, input = half its size (2x models), or half size
//!   and back up (1x).
//!
//! For each model (default: the video face models) and variant it prints the mean over the
//! pictures of PSNR-Y and SSIM-Y (BT.601 luma, 11x11 Gaussian window sigma 1.5) against the
//! reference and against the `old` variant's output, over the pixels where a detected face's mask
//! is >= 0.5 (the face area the face network changes), and the mean seconds per picture.
//!
//! Variants:
//! - `base`: the base network alone (no face restored): the floor;
//! - `old`: the style before issue 14 (face crops at input size, capped at 768 px; portrait_restore
//!   faces through x4plus; `--no-old`
//!   skips it and the "vs old" columns);
//! - `catalog`: the catalog's style today;
//! - `--variant name:key=value,...` with keys density (out_density), max (work_max), net (face net
//!   stem), strength: the catalog's style with those fields changed.
//!
//! Env LUCENT_MODEL_DIR as for the tests.

use lucent_core::cpu::CpuBackend;
use lucent_engine::face::blend::FaceMask;
use lucent_engine::face::image::Rgb;
use lucent_engine::face::{detect_faces, FacePipeline};
use lucent_engine::photo::image_to_raster;
use lucent_engine::{catalog, Cancel, Engine, Enhancer, FaceStyle, Kind, Pipeline, Raster, VideoState};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn decode(p: &Path) -> Raster {
    let b = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    image_to_raster(lucent_codec::decode(&b, &Default::default()).unwrap()).unwrap().0
}

/// 8-bit RGB raster of `img` resampled to w x h.
fn to_u8(img: &Rgb) -> Raster {
    let mut v = Vec::with_capacity(img.w * img.h * 3);
    for y in 0..img.h {
        for x in 0..img.w {
            for c in 0..3 {
                v.push((img.get(c, x, y).clamp(0.0, 1.0) * 255.0 + 0.5) as u8);
            }
        }
    }
    Raster::from_u8(img.w, img.h, 3, v).unwrap()
}

fn resized(r: &Raster, w: usize, h: usize) -> Raster {
    to_u8(&Rgb::from_raster(r.as_ref()).resize(w, h))
}

fn luma_plane(r: &Raster) -> Vec<f64> {
    let mut v = Vec::with_capacity(r.width * r.height);
    for y in 0..r.height {
        for x in 0..r.width {
            v.push(255.0 * (0.299 * r.get(x, y, 0) as f64 + 0.587 * r.get(x, y, 1) as f64 + 0.114 * r.get(x, y, 2) as f64));
        }
    }
    v
}

/// Separable Gaussian blur (11 taps, sigma 1.5, edges clamped).
fn blur(p: &[f64], w: usize, h: usize) -> Vec<f64> {
    let k: Vec<f64> = (-5i32..=5).map(|i| (-(i * i) as f64 / (2.0 * 1.5 * 1.5)).exp()).collect();
    let s: f64 = k.iter().sum();
    let k: Vec<f64> = k.iter().map(|v| v / s).collect();
    let mut t = vec![0.0; w * h];
    for y in 0..h {
        for x in 0..w {
            t[y * w + x] = (0..11).map(|j| k[j] * p[y * w + (x as isize + j as isize - 5).clamp(0, w as isize - 1) as usize]).sum();
        }
    }
    let mut o = vec![0.0; w * h];
    for y in 0..h {
        for x in 0..w {
            o[y * w + x] = (0..11).map(|j| k[j] * t[(y as isize + j as isize - 5).clamp(0, h as isize - 1) as usize * w + x]).sum();
        }
    }
    o
}

/// (PSNR-Y dB, mean SSIM-Y) of `a` against `b` over the pixels where `mask` is set.
fn compare(a: &Raster, b: &Raster, mask: &[bool]) -> (f64, f64) {
    let (w, h) = (a.width, a.height);
    assert_eq!((w, h), (b.width, b.height));
    let (ya, yb) = (luma_plane(a), luma_plane(b));
    let mul = |p: &[f64], q: &[f64]| p.iter().zip(q).map(|(x, y)| x * y).collect::<Vec<_>>();
    let (ma, mb) = (blur(&ya, w, h), blur(&yb, w, h));
    let (saa, sbb, sab) = (blur(&mul(&ya, &ya), w, h), blur(&mul(&yb, &yb), w, h), blur(&mul(&ya, &yb), w, h));
    let (c1, c2) = ((0.01 * 255.0f64).powi(2), (0.03 * 255.0f64).powi(2));
    let (mut se, mut ss, mut n) = (0.0, 0.0, 0usize);
    for i in 0..w * h {
        if !mask[i] {
            continue;
        }
        se += (ya[i] - yb[i]).powi(2);
        let (va, vb, cov) = (saa[i] - ma[i] * ma[i], sbb[i] - mb[i] * mb[i], sab[i] - ma[i] * mb[i]);
        ss += ((2.0 * ma[i] * mb[i] + c1) * (2.0 * cov + c2)) / ((ma[i] * ma[i] + mb[i] * mb[i] + c1) * (va + vb + c2));
        n += 1;
    }
    let mse = se / n.max(1) as f64;
    (10.0 * (255.0 * 255.0 / mse.max(1e-10)).log10(), ss / n.max(1) as f64)
}

/// One test picture for a model: degraded input, reference at the output size.
struct Case {
    name: String,
    input: Raster,
    reference: Raster,
}

fn cases(scale: usize, n: usize) -> Vec<Case> {
    let dir = root().join("../shared/data/faces");
    let mut out = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(dir.join("cropped")).unwrap().map(|d| d.unwrap().path()).collect();
    names.sort();
    for p in names.into_iter().take(n) {
        let img = decode(&p);
        let reference = resized(&img, 128 * scale, 128 * scale);
        let input = if scale == 1 { resized(&resized(&img, 64, 64), 128, 128) } else { resized(&img, 128, 128) };
        out.push(Case { name: p.file_name().unwrap().to_string_lossy().into(), input, reference });
    }
    let mut names: Vec<_> = std::fs::read_dir(dir.join("whole")).unwrap().map(|d| d.unwrap().path()).collect();
    names.sort();
    for p in names {
        let img = decode(&p);
        let img = if img.channels == 3 { img } else { to_u8(&Rgb::from_raster(img.as_ref())) };
        let (w, h) = ((img.width / 2) * 2 / scale * scale, (img.height / 2) * 2 / scale * scale);
        let reference = resized(&img, w, h);
        let half = resized(&img, w / 2, h / 2);
        let input = if scale == 1 { resized(&half, w, h) } else { resized(&img, w / scale, h / scale) };
        out.push(Case { name: p.file_name().unwrap().to_string_lossy().into(), input, reference });
    }
    out
}

fn variant(base: FaceStyle, spec: &str) -> (String, FaceStyle) {
    let (name, kv) = spec.split_once(':').unwrap_or((spec, ""));
    let mut st = base;
    for item in kv.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = item.split_once('=').unwrap_or_else(|| panic!("variant item {item}: key=value"));
        match k {
            "density" => st.out_density = v.parse().unwrap(),
            "max" => st.work_max = v.parse().unwrap(),
            "strength" => st.strength = v.parse().unwrap(),
            "net" => st.face_net = Box::leak(v.to_string().into_boxed_str()),
            _ => panic!("unknown variant key {k}"),
        }
    }
    (name.to_string(), st)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut models: Vec<String> = catalog::CATALOG
        .iter()
        .filter(|m| m.kind == Kind::Video && matches!(m.pipeline, Pipeline::Face(_)))
        .map(|m| m.name.to_string())
        .collect();
    let mut n = 12usize;
    let mut specs: Vec<String> = Vec::new();
    let mut with_old = true;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--models" => models = args[i + 1].split(',').map(String::from).collect(),
            "--n" => n = args[i + 1].parse().unwrap(),
            "--variant" => specs.push(args[i + 1].clone()),
            "--no-old" => {
                // Skip the (costly) old style: the "vs old" columns are then absent.
                with_old = false;
                i += 1;
                continue;
            }
            a => panic!("unknown argument {a}"),
        }
        i += 2;
    }
    let model_dir = std::env::var_os("LUCENT_MODEL_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("../shared/models"));
    let e = Engine::with_backend(Arc::new(CpuBackend::new(None)), &model_dir, None).expect("engine");
    let rt = e.runtime();
    let cancel = Cancel::new();
    for model in &models {
        let m = catalog::lookup(Kind::Video, model).unwrap();
        let Pipeline::Face(st) = m.pipeline else { panic!("{model} is not a face model") };
        // The style before issue 14: crops at input size up to 768 px; portrait faces through x4plus.
        let old = FaceStyle { out_density: 0.0, work_max: 768, ..st };
        let old = if model.starts_with("portrait_restore") { FaceStyle { face_net: "sr/realesrgan-x4plus", face_margin: 64, ..old } } else { old };
        let mut variants = vec![("old".to_string(), old), ("base".to_string(), FaceStyle { strength: 0.0, ..st }), ("catalog".to_string(), st)];
        if st == old {
            variants.pop(); // the catalog's style is the old one: no need to run it twice
        }
        if !with_old {
            variants.remove(0);
        }
        variants.extend(specs.iter().map(|s| variant(st, s)));
        let cs = cases(m.scale, n);
        // Face masks (output px) from the detector on each input.
        let masks: Vec<Vec<bool>> = cs
            .iter()
            .map(|c| {
                let faces = detect_faces(rt, c.input.as_ref(), &cancel).unwrap();
                let ms: Vec<FaceMask> = faces.iter().map(|f| FaceMask::new(f, m.scale as f32)).collect();
                let (w, h) = (c.reference.width, c.reference.height);
                (0..w * h).map(|i| ms.iter().any(|k| k.at(i % w, i / w) >= 0.5)).collect()
            })
            .collect();
        println!("== {model} ({} pictures; faces found in {})", cs.len(), masks.iter().filter(|k| k.iter().any(|&b| b)).count());
        let mut old_out: Vec<Raster> = Vec::new();
        for (vname, style) in &variants {
            let p = FacePipeline::new(*style, m.scale).unwrap();
            let (mut pr, mut sr, mut po, mut so, mut secs, mut k) = (0.0, 0.0, 0.0, 0.0, 0.0, 0usize);
            let mut per: Vec<String> = Vec::new();
            for (ci, c) in cs.iter().enumerate() {
                let mut out = Raster::new(c.input.width * m.scale, c.input.height * m.scale, 3, 8).unwrap();
                let t = Instant::now();
                p.run_frame(rt, c.input.as_ref(), &mut out.as_mut(), &mut VideoState::new(), &cancel).unwrap();
                secs += t.elapsed().as_secs_f64();
                if vname == "old" {
                    old_out.push(out.clone());
                }
                if !masks[ci].iter().any(|&b| b) {
                    continue;
                }
                let (a, b) = compare(&out, &c.reference, &masks[ci]);
                let (x, y) = old_out.get(ci).map_or((f64::NAN, f64::NAN), |o| compare(&out, o, &masks[ci]));
                per.push(format!("{} {a:.2}", c.name));
                pr += a;
                sr += b;
                po += x;
                so += y;
                k += 1;
            }
            let kf = k.max(1) as f64;
            println!(
                "{vname:<10} density {:<4} max {:<4} net {:<28} strength {:<4} | vs reference: PSNR-Y {:.2} dB SSIM {:.4} | vs old: PSNR-Y {:.2} dB SSIM {:.4} | {:.2} s/picture",
                style.out_density,
                style.work_max,
                style.face_net,
                style.strength,
                pr / kf,
                sr / kf,
                po / kf,
                so / kf,
                secs / cs.len() as f64
            );
            if std::env::var_os("FACE_EVAL_VERBOSE").is_some() {
                println!("    {}", per.join(", "));
            }
        }
    }
}
