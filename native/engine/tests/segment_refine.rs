//! The segmentation edge refinement (`pipelines::segment::refine`, a colour guided filter) on a
//! synthetic soft-edged subject whose true alpha is known: a disc with a smooth 4-px edge and a
//! ragged rim, a smooth magenta gradient composited over a real photo
//! (shared/data/photos/ADE_val_00000114.jpg: sky, sea, rocks, sand). The coarse mask imitates the
//! network's: the true alpha box-averaged down 3x and 8x (an 800-px / 2560-px photo's 320-px map) and resized back bilinearly. The refined
//! alpha must be nearer the truth than that mask (MAE), by a margin. The subject's colour differs
//! from the background's: where they match, the filter cannot place the edge and blurs it within
//! its radius (docs/segmentation.md says so and measures it).
use lucent_engine::photo::image_to_raster;
use lucent_engine::pipelines::interp;
use lucent_engine::pipelines::segment::refine::{guided_filter, Guide, GuidedParams, DEFAULT_EPS, RADIUS_PER_MAP_PX};
use lucent_engine::{Raster, Samples};
use std::path::{Path, PathBuf};

fn photos() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/photos");
    if !p.is_dir() {
        assert!(std::env::var_os("CI").is_none(), "CI: ../shared/data missing");
        eprintln!("skipping: ../shared/data is absent");
        return None;
    }
    Some(p)
}

/// A `w` x `h` crop at (x, y) of the photo as 8-bit RGB.
fn crop(dir: &Path, name: &str, x: usize, y: usize, w: usize, h: usize) -> Vec<u8> {
    let b = std::fs::read(dir.join(name)).unwrap();
    let r: Raster = interp::to_rgb8(image_to_raster(lucent_codec::decode(&b, &Default::default()).unwrap()).unwrap().0.as_ref()).unwrap();
    let Samples::U8(v) = &r.samples else { unreachable!() };
    assert!(x + w <= r.width && y + h <= r.height, "{name} is {}x{}", r.width, r.height);
    let mut o = Vec::with_capacity(w * h * 3);
    for row in y..y + h {
        o.extend_from_slice(&v[(row * r.width + x) * 3..(row * r.width + x + w) * 3]);
    }
    o
}

/// The true alpha: a disc of radius ~95 px whose rim wobbles (a sum of sines: locks of hair) with
/// a 4-px soft edge.
fn true_alpha(w: usize, h: usize) -> Vec<f32> {
    let (cx, cy) = (w as f32 / 2.0, h as f32 / 2.0);
    let mut a = vec![0f32; w * h];
    for y in 0..h {
        for x in 0..w {
            let (dx, dy) = (x as f32 + 0.5 - cx, y as f32 + 0.5 - cy);
            let t = dy.atan2(dx);
            let rim = 95.0 + 6.0 * (7.0 * t).sin() + 4.0 * (23.0 * t + 1.0).sin() + 3.0 * (41.0 * t).cos();
            let d = (dx * dx + dy * dy).sqrt();
            a[y * w + x] = ((rim - d) / 4.0 + 0.5).clamp(0.0, 1.0);
        }
    }
    a
}

/// The network's view: `alpha` box-averaged by `f` and resized back bilinearly (centres aligned).
fn coarse(alpha: &[f32], w: usize, h: usize, f: usize) -> Vec<f32> {
    let (lw, lh) = (w / f, h / f);
    let mut low = vec![0f32; lw * lh];
    for ly in 0..lh {
        for lx in 0..lw {
            let mut s = 0.0;
            for y in ly * f..(ly + 1) * f {
                for x in lx * f..(lx + 1) * f {
                    s += alpha[y * w + x];
                }
            }
            low[ly * lw + lx] = s / (f * f) as f32;
        }
    }
    let at = |v: f32, n: usize| {
        let p = (v / f as f32 - 0.5).clamp(0.0, (n - 1) as f32);
        let i = p.floor() as usize;
        (i, (i + 1).min(n - 1), p - i as f32)
    };
    let mut o = vec![0f32; w * h];
    for y in 0..h {
        let (y0, y1, wy) = at(y as f32 + 0.5, lh);
        for x in 0..w {
            let (x0, x1, wx) = at(x as f32 + 0.5, lw);
            let t = low[y0 * lw + x0] * (1.0 - wx) + low[y0 * lw + x1] * wx;
            let b = low[y1 * lw + x0] * (1.0 - wx) + low[y1 * lw + x1] * wx;
            o[y * w + x] = t * (1.0 - wy) + b * wy;
        }
    }
    o
}

fn mae(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs() as f64).sum::<f64>() / a.len() as f64
}

#[test]
fn refined_alpha_is_nearer_the_truth_than_the_coarse_mask() {
    let Some(dir) = photos() else { return };
    let (w, h) = (256, 256);
    // The subject: a smooth two-colour gradient (a plain garment, skin); the background: a real photo.
    let fg: Vec<u8> = (0..w * h * 3)
        .map(|i| {
            let (x, y, c) = ((i / 3) % w, (i / 3) / w, i % 3);
            let t = (x + y) as f32 / (w + h) as f32;
            ([220.0, 40.0, 160.0][c] * (1.0 - t) + [150.0, 20.0, 90.0][c] * t) as u8
        })
        .collect();
    let bg = crop(&dir, "ADE_val_00000114.jpg", 0, 0, w, h);
    let gt = true_alpha(w, h);
    let img: Vec<u8> = (0..w * h * 3)
        .map(|i| {
            let a = gt[i / 3];
            (a * fg[i] as f32 + (1.0 - a) * bg[i] as f32).round() as u8
        })
        .collect();
    // f = 3: the measured photos' scale (800 px over a 320-px map); f = 8: a 2560-px photo.
    for (f, bound) in [(3usize, 0.95), (8, 0.97)] {
        let rough = coarse(&gt, w, h, f);
        // The shipped rule: radius RADIUS_PER_MAP_PX map pixels (a map pixel is f photo pixels).
        let prm = GuidedParams { radius: (RADIUS_PER_MAP_PX * f as f32).round() as usize, eps: DEFAULT_EPS, subsample: 1, snap: true };
        let refined = guided_filter(Guide::Rgb8(&img), &rough, w, h, prm).unwrap();
        let (m0, m1) = (mae(&rough, &gt), mae(&refined, &gt));
        eprintln!("f = {f}: MAE coarse {m0:.5} refined {m1:.5} (SAD {:.3} -> {:.3})", m0 * (w * h) as f64 / 1000.0, m1 * (w * h) as f64 / 1000.0);
        assert!(m1 < bound * m0, "f = {f}: the refined alpha (MAE {m1:.5}) is not below {bound} x the coarse mask's ({m0:.5})");
        // The subsampled (fast) filter keeps a gain.
        let fast = guided_filter(Guide::Rgb8(&img), &rough, w, h, GuidedParams { subsample: 2, ..prm }).unwrap();
        let m2 = mae(&fast, &gt);
        eprintln!("f = {f}: MAE fast (s = 2) {m2:.5}");
        assert!(m2 < m0, "f = {f}, subsampled: MAE {m2:.5} vs coarse {m0:.5}");
    }
}

/// Speed on a 12 MP photo (not a check: `cargo test --release -p lucent-engine --test
/// segment_refine -- --ignored --nocapture`).
#[test]
#[ignore]
fn speed_12_mp() {
    let (w, h) = (4000, 3000);
    let img: Vec<u8> = (0..w * h * 3).map(|i: usize| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let a: Vec<f32> = (0..w * h).map(|i| ((i % w) as f32 / w as f32 - 0.5) * 4.0 + 0.5).map(|v| v.clamp(0.0, 1.0)).collect();
    let prm = GuidedParams::for_mask(w, h);
    let t = std::time::Instant::now();
    let q = guided_filter(Guide::Rgb8(&img), &a, w, h, prm).unwrap();
    eprintln!("{w}x{h}, {prm:?}: {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
    assert_eq!(q.len(), w * h);
}

/// The engine's filter against scripts/seg-edges-eval.py's SHIPPED column on real photos: the
/// script's `--dump DIR` in $SEG_XCHECK (NAME.rgb8, NAME.coarse and NAME.py as raw
/// little-endian, NAME.json {w, h}); run with `--ignored` (the photos are not in the repository).
#[test]
#[ignore]
fn equals_the_measuring_script() {
    let Some(dir) = std::env::var_os("SEG_XCHECK").map(PathBuf::from) else { return };
    let f32s = |p: PathBuf| std::fs::read(p).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect::<Vec<f32>>();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        let (w, h) = (j["w"].as_u64().unwrap() as usize, j["h"].as_u64().unwrap() as usize);
        let rgb = std::fs::read(p.with_extension("rgb8")).unwrap();
        let (coarse, want) = (f32s(p.with_extension("coarse")), f32s(p.with_extension("py")));
        let got = guided_filter(Guide::Rgb8(&rgb), &coarse, w, h, GuidedParams::for_mask(w, h)).unwrap();
        let d = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        eprintln!("{}: {w}x{h}, max abs diff {d:e}", p.display());
        assert!(d <= 1e-4);
    }
}
