//! The work meter (issue 29), the per-frame megapixel limit and the faces bound, on the real networks
//! (shared/models or LUCENT_MODEL_DIR) and real pictures (shared/data), CPU backend. Work units are output
//! pixels delivered by each network run (core/src/backend.rs `Cancel`): a budget just below a call's work
//! stops it with `budget_exceeded` before any network runs (nothing counted); at the budget it runs, and
//! its work is exactly the pixels its networks delivered. Pictures are small: the whole file runs in seconds.

use lucent_codec::{EncodeOptions, Format};
use lucent_core::cpu::CpuBackend;
use lucent_engine::face::blend::face_region;
use lucent_engine::face::image::Rgb;
use lucent_engine::face::{chosen_faces, detect_faces, FacePipeline, FACE_ALLOWANCE, MAX_FACES};
use lucent_engine::photo::{image_to_raster, raster_to_image};
use lucent_engine::video::{self, FrameLimits};
use lucent_engine::{catalog, Cancel, Code, EnhanceOptions, Engine, Enhancer, Frames, Kind, Pipeline, Raster, Samples};
use std::path::PathBuf;
use std::sync::Arc;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn model_dir() -> PathBuf {
    std::env::var_os("LUCENT_MODEL_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("../shared/models"))
}

fn have_data() -> bool {
    let ok = model_dir().join("face/retinaface-slim.param").exists()
        && model_dir().join("sr/realesr-animevideov3-x2.param").exists()
        && root().join("../shared/data/faces").is_dir();
    if !ok {
        assert!(std::env::var_os("CI").is_none(), "CI: models or ../shared/data missing");
        eprintln!("skipping: the models or ../shared/data are absent");
    }
    ok
}

macro_rules! need_data {
    () => {
        if !have_data() {
            return;
        }
    };
}

fn engine() -> Engine {
    Engine::with_backend(Arc::new(CpuBackend::new(None)), &model_dir(), None).expect("engine")
}

fn decode(path: PathBuf) -> Raster {
    let b = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    image_to_raster(lucent_codec::decode(&b, &Default::default()).unwrap()).unwrap().0
}

/// `r` resampled to w x h as 8-bit RGB.
fn rgb8(r: &Raster, w: usize, h: usize) -> Vec<u8> {
    let img = Rgb::from_raster(r.as_ref()).resize(w, h);
    let mut v = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        for x in 0..w {
            for c in 0..3 {
                v.push((img.get(c, x, y).clamp(0.0, 1.0) * 255.0 + 0.5) as u8);
            }
        }
    }
    v
}

/// A crop of a real photo (shared/data/photos/0014.jpg) as a small PNG.
fn small_png(w: usize, h: usize) -> Vec<u8> {
    let r = decode(root().join("../shared/data/photos/0014.jpg"));
    let px = rgb8(&r, w, h);
    let img = raster_to_image(Raster::from_u8(w, h, 3, px).unwrap(), Default::default());
    lucent_codec::encode(&img, Format::Png, &EncodeOptions::default()).unwrap()
}

/// A crowd made here: `cols` x `rows` copies of a real aligned face (shared/data/faces/cropped/0143.png) at
/// `side` px, `gap` px apart on a grey canvas.
fn crowd(cols: usize, rows: usize, side: usize, gap: usize) -> Raster {
    let face = rgb8(&decode(root().join("../shared/data/faces/cropped/0143.png")), side, side);
    let (w, h) = (cols * (side + gap) + gap, rows * (side + gap) + gap);
    let mut v = vec![128u8; w * h * 3];
    for cy in 0..rows {
        for cx in 0..cols {
            let (x0, y0) = (gap + cx * (side + gap), gap + cy * (side + gap));
            for y in 0..side {
                let d = ((y0 + y) * w + x0) * 3;
                v[d..d + side * 3].copy_from_slice(&face[y * side * 3..(y + 1) * side * 3]);
            }
        }
    }
    Raster::from_u8(w, h, 3, v).unwrap()
}

fn photo_opts(model: &str) -> EnhanceOptions {
    EnhanceOptions { model: model.into(), format: "png".into(), ..Default::default() }
}

/// A photo through a plain SR model: its work is its output; a budget one pixel short stops it before
/// the network runs (nothing counted); the budget exactly lets it run.
#[test]
fn photo_budget_is_checked_before_the_network_runs() {
    need_data!();
    let e = engine();
    let png = small_png(64, 48);
    let need = 64 * 48 * 4u64; // general_2x: 128 x 96 out
    let unbounded = Cancel::new();
    let out = e.enhance(&png, &photo_opts("general_2x"), &unbounded, &|_| {}).unwrap();
    assert_eq!((out.width, out.height), (128, 96));
    assert_eq!(unbounded.work(), need);

    let short = Cancel::with_budget(Some(need - 1));
    let t = std::time::Instant::now();
    let err = e.enhance(&png, &photo_opts("general_2x"), &short, &|_| {}).unwrap_err();
    assert_eq!(err.code, Code::BudgetExceeded, "{err}");
    assert_eq!(short.work(), 0, "nothing ran, nothing counted");
    eprintln!("refused in {:?}", t.elapsed());

    let exact = Cancel::with_budget(Some(need));
    e.enhance(&png, &photo_opts("general_2x"), &exact, &|_| {}).unwrap();
    assert_eq!(exact.work(), need);
    // A zero budget: nothing at all runs.
    let zero = Cancel::with_budget(Some(0));
    assert_eq!(e.enhance(&png, &photo_opts("general_2x"), &zero, &|_| {}).unwrap_err().code, Code::BudgetExceeded);
}

/// Video frames: each frame's base network is charged before it runs; a budget for two frames of a
/// three-frame batch stops at the third with two frames' work counted.
#[test]
fn frames_budget_stops_at_the_frame_that_would_pass_it() {
    need_data!();
    let e = engine();
    let (w, h) = (48, 32);
    let frame = rgb8(&decode(root().join("../shared/data/photos/0030.jpg")), w, h);
    let batch: Vec<u8> = frame.iter().copied().cycle().take(frame.len() * 3).collect();
    let per = (w * 2 * h * 2) as u64; // general_restore_2x: 2x
    let all = Cancel::new();
    e.enhance_frames(Frames::new(&batch, w, h, 3), "general_restore_2x", None, &all).unwrap();
    assert_eq!(all.work(), 3 * per);
    let two = Cancel::with_budget(Some(3 * per - 1));
    let err = e.enhance_frames(Frames::new(&batch, w, h, 3), "general_restore_2x", None, &two).unwrap_err();
    assert_eq!(err.code, Code::BudgetExceeded, "{err}");
    assert_eq!(two.work(), 2 * per);
}

/// RIFE: each interpolated frame costs its pixels, copies are free; checked before RIFE runs.
#[test]
fn interpolation_budget_counts_made_frames_only() {
    need_data!();
    if !model_dir().join(format!("{}.param", catalog::RIFE)).exists() {
        return eprintln!("skipping: no RIFE model");
    }
    let e = engine();
    let (w, h) = (64, 64);
    let a = rgb8(&decode(root().join("../shared/data/photos/0030.jpg")), w, h);
    let batch: Vec<u8> = a.iter().chain(a.iter()).copied().collect();
    let positions = [0.0, 0.5, 1.0];
    let all = Cancel::new();
    e.interpolate_frames(Frames::new(&batch, w, h, 2), &positions, &all).unwrap();
    assert_eq!(all.work(), (w * h) as u64, "one frame made, two copied");
    let short = Cancel::with_budget(Some((w * h) as u64 - 1));
    let err = e.interpolate_frames(Frames::new(&batch, w, h, 2), &positions, &short).unwrap_err();
    assert_eq!(err.code, Code::BudgetExceeded, "{err}");
    assert_eq!(short.work(), 0);
    // Copies only: no work, whatever the budget.
    let none = Cancel::with_budget(Some(0));
    e.interpolate_frames(Frames::new(&batch, w, h, 2), &[0.0, 1.0], &none).unwrap();
}

/// The per-frame megapixel limit: a catalog 4x model on frames whose output passes 36 MP, and an own
/// model on frames over its own input / output limits, are refused before any output is allocated or any
/// network runs (today's main allocated w*s x h*s per frame and ran: 41 MP frames here).
#[test]
fn frames_over_the_per_frame_limit_are_refused() {
    need_data!();
    let e = engine();
    let (w, h) = (1600, 1600); // x4: 6400 x 6400 = 41 MP per frame
    let big = vec![100u8; w * h * 3];
    let t = std::time::Instant::now();
    let c = Cancel::new();
    let err = e.enhance_frames(Frames::new(&big, w, h, 1), "general_restore_4x", None, &c).unwrap_err();
    assert_eq!(err.code, Code::ImageTooLarge, "{err}");
    assert_eq!(c.work(), 0);
    assert!(t.elapsed().as_secs_f64() < 2.0, "refused before running: {:?}", t.elapsed());
    // Under the limit the same model runs (a thin strip, same width).
    let strip = vec![100u8; w * 8 * 3];
    e.enhance_frames(Frames::new(&strip, w, 8, 1), "general_restore_4x", None, &Cancel::new()).unwrap();

    // An own network (any weights file or ncnn stem) within the limits its registry gives.
    let stem = model_dir().join("sr/realesr-animevideov3-x2").display().to_string();
    let own = |frames: Frames<'_>, limits: FrameLimits| {
        lucent_engine::guard("t", || video::enhance_frames_custom(e.runtime(), frames, &stem, 1, limits, &Cancel::new()))
    };
    let lim = |i: u32, o: u32| FrameLimits { max_in_mp: Some(i), max_out_mp: o };
    let (w1, h1) = (1200, 1000); // 1.2 MP in, 4.8 MP out at x2
    let f = vec![90u8; w1 * h1 * 3];
    assert_eq!(own(Frames::new(&f, w1, h1, 1), lim(1, 36)).unwrap_err().code, Code::ImageTooLarge);
    assert_eq!(own(Frames::new(&f, w1, h1, 1), lim(70, 4)).unwrap_err().code, Code::ImageTooLarge);
    let s = vec![90u8; 40 * 30 * 3];
    let out = own(Frames::new(&s, 40, 30, 1), lim(1, 4)).unwrap();
    assert_eq!((out.width, out.height), (80, 60));
    // Interpolation frames: the catalog's per-frame limit at scale 1.
    let (w2, h2) = (6100, 6000);
    let g = vec![0u8; w2 * h2 * 3 * 2];
    let err = e.interpolate_frames(Frames::new(&g, w2, h2, 2), &[0.5], &Cancel::new()).unwrap_err();
    assert_eq!(err.code, Code::ImageTooLarge, "{err}");
}

/// Hole 5: a crowd of 24 real faces (made here) through a face model: the detector finds them all, the
/// face network restores MAX_FACES of them, the largest first, and the meter counts exactly the base output
/// plus the chosen faces' regions at the output's scale, within the face allowance.
#[test]
fn many_faces_are_bounded_and_metered() {
    need_data!();
    let e = engine();
    let rt = e.runtime();
    let src = crowd(6, 4, 32, 20);
    let m = catalog::lookup(Kind::Video, "face_soft_2x").unwrap();
    let Pipeline::Face(style) = m.pipeline else { panic!("face_soft_2x is a face model") };
    let p = FacePipeline::new(style, 2).unwrap();
    let found = detect_faces(rt, src.as_ref(), &Cancel::new()).unwrap();
    assert!(found.len() > MAX_FACES, "the crowd has {} faces found, want > {MAX_FACES}", found.len());
    let chosen = chosen_faces(&found.iter().collect::<Vec<_>>(), src.width, src.height, 2);
    assert_eq!(chosen.len(), MAX_FACES, "the count binds on this crowd");
    let base = (src.width * 2 * src.height * 2) as u64;
    let faces: u64 = chosen.iter().map(|&i| face_region(&found[i], src.width, src.height).map_or(0, |r| (r.w * 2 * r.h * 2) as u64)).sum();
    assert!(faces as f64 <= FACE_ALLOWANCE * base as f64);

    let c = Cancel::new();
    let out = p.run(rt, src.as_ref(), &c, &mut |_, _| {}).unwrap();
    assert_eq!((out.width, out.height), (src.width * 2, src.height * 2));
    assert_eq!(c.work(), base + faces, "base {base} + {} faces {faces}", chosen.len());
    // One pixel short of that work: stops before the last face's network runs.
    let short = Cancel::with_budget(Some(base + faces - 1));
    assert_eq!(p.run(rt, src.as_ref(), &short, &mut |_, _| {}).unwrap_err().code, Code::BudgetExceeded);
    assert!(short.work() < base + faces && short.work() >= base);
    let Samples::U8(_) = &out.samples else { panic!("8-bit in, 8-bit out") };
}

/// The faces bound keeps every face of the real photos of shared/data (group photos included): the
/// bound only binds on crowds.
#[test]
fn honest_photos_keep_every_face() {
    need_data!();
    let e = engine();
    let mut n = 0;
    for d in ["../shared/data/faces/whole", "../shared/data/photos"] {
        for p in std::fs::read_dir(root().join(d)).unwrap().flatten().map(|e| e.path()) {
            let r = decode(p.clone());
            for scale in [1, 2, 4] {
                let found = detect_faces(e.runtime(), r.as_ref(), &Cancel::new()).unwrap();
                let chosen = chosen_faces(&found.iter().collect::<Vec<_>>(), r.width, r.height, scale);
                assert_eq!(chosen, (0..found.len()).collect::<Vec<_>>(), "{}: x{scale}", p.display());
                n += found.len();
            }
        }
    }
    assert!(n > 0);
}

/// Figures for the budget's margin (run with `--ignored --nocapture`): on the real pictures of shared/data,
/// (1) the faces' share of a picture's output and whether the bound drops any face of an honest photo, and
/// (2) the tile overlap the meter does not count (tile regions with their margins / the output), per model, at
/// the CPU backend's tile side.
#[test]
#[ignore]
fn measure_face_share_and_tile_overlap() {
    need_data!();
    let e = engine();
    let rt = e.runtime();
    let mut pics: Vec<PathBuf> = Vec::new();
    for d in ["../shared/data/faces/whole", "../shared/data/photos"] {
        let mut v: Vec<PathBuf> = std::fs::read_dir(root().join(d)).unwrap().flatten().map(|e| e.path()).collect();
        v.sort();
        pics.extend(v);
    }
    for p in &pics {
        let r = decode(p.clone());
        let found = detect_faces(rt, r.as_ref(), &Cancel::new()).unwrap();
        let chosen = chosen_faces(&found.iter().collect::<Vec<_>>(), r.width, r.height, 1);
        let all: usize = found.iter().filter_map(|f| face_region(f, r.width, r.height)).map(|g| g.w * g.h).sum();
        let taken: usize = chosen.iter().filter_map(|&i| face_region(&found[i], r.width, r.height)).map(|g| g.w * g.h).sum();
        eprintln!(
            "faces {:<40} {}x{}: found {}, restored {}, their crops {:.3} of the picture (all found: {:.3})",
            p.file_name().unwrap().to_string_lossy(), r.width, r.height, found.len(), chosen.len(),
            taken as f64 / (r.width * r.height) as f64, all as f64 / (r.width * r.height) as f64
        );
    }
    for m in catalog::CATALOG.iter().filter(|m| m.kind == Kind::Photo && m.unavailable.is_none()) {
        let spec = match m.pipeline {
            Pipeline::TiledSr => lucent_engine::SrSpec::for_model(m).unwrap(),
            Pipeline::Face(st) => lucent_engine::SrSpec::new(st.base, m.scale, st.base_margin).unwrap(),
            _ => continue,
        };
        let Ok(l) = rt.network(&spec.stem) else { continue };
        let plan = spec.plan(rt.tile_for(&l.net));
        let (p, mg, t) = (plan.pad, plan.margin.max(plan.pad), plan.tile);
        let mut line = format!("overlap {:<24} tile {t:>3} margin {mg:>2}:", m.name);
        for (w, h) in [(179, 179), (512, 256), (1204, 645), (2000, 1500)] {
            let (pw, ph) = (w + 2 * p, h + 2 * p);
            let mut px = 0usize;
            for cy0 in (0..h).step_by(t) {
                for cx0 in (0..w).step_by(t) {
                    let (cx1, cy1) = ((cx0 + t).min(w), (cy0 + t).min(h));
                    let (rx0, ry0) = ((cx0 + p).saturating_sub(mg), (cy0 + p).saturating_sub(mg));
                    let (rx1, ry1) = ((cx1 + p + mg).min(pw), (cy1 + p + mg).min(ph));
                    px += (rx1 - rx0) * (ry1 - ry0);
                }
            }
            line += &format!(" {w}x{h} {:.2}", px as f64 / (w * h) as f64);
        }
        eprintln!("{line}");
    }
}
