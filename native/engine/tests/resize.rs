//! Output-size resampling (`resample::resize`) against a direct 2-D reference on random inputs, its
//! invariants (constants, ramps, alpha premultiplication, cancel), and the photo path's
//! `target_width` / `target_height` on a real network (CPU backend, shared models when present).

use lucent_codec::{EncodeOptions, Format};
use lucent_core::cpu::CpuBackend;
use lucent_engine::photo::{image_to_raster, raster_to_image, target_size, MAX_TARGET_SIDE};
use lucent_engine::resample::{lanczos3, resize, AREA_FROM_RATIO};
use lucent_engine::{Cancel, Code, EnhanceOptions, Engine, Raster};
use std::path::PathBuf;
use std::sync::Arc;

/// Small deterministic PRNG (xorshift64*), so the tests need no extra crate.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn random_u8(w: usize, h: usize, c: usize, seed: u64) -> Raster {
    let mut r = Rng(seed);
    Raster::from_u8(w, h, c, (0..w * h * c).map(|_| (r.next() >> 56) as u8).collect()).unwrap()
}

fn random_u16(w: usize, h: usize, c: usize, seed: u64) -> Raster {
    let mut r = Rng(seed);
    Raster::from_u16(w, h, c, (0..w * h * c).map(|_| (r.next() >> 48) as u16).collect()).unwrap()
}

/// Reference weights of one axis, written from the definitions (f64): Lanczos3 stretched by the
/// ratio when downscaling, or the overlap of each source pixel with the output pixel's footprint.
fn ref_weights(n_in: usize, n_out: usize, o: usize) -> Vec<f64> {
    let ratio = n_in as f64 / n_out as f64;
    let w: Vec<f64> = if ratio >= AREA_FROM_RATIO {
        let (a, b) = (o as f64 * ratio, (o + 1) as f64 * ratio);
        (0..n_in).map(|i| (b.min(i as f64 + 1.0) - a.max(i as f64)).max(0.0)).collect()
    } else {
        let s = ratio.max(1.0);
        let centre = (o as f64 + 0.5) * ratio;
        (0..n_in)
            .map(|i| {
                let x = ((i as f64 + 0.5 - centre) / s).abs();
                if x < 1e-9 {
                    1.0
                } else if x < 3.0 {
                    let p = std::f64::consts::PI * x;
                    3.0 * p.sin() * (p / 3.0).sin() / (p * p)
                } else {
                    0.0
                }
            })
            .collect()
    };
    let sum: f64 = w.iter().sum();
    w.iter().map(|v| v / sum).collect()
}

/// Direct 2-D reference (every source pixel, f64), alpha premultiplied; 0..1 values.
fn reference(src: &Raster, w: usize, h: usize) -> Vec<f64> {
    let c = src.channels;
    let alpha = c == 2 || c == 4;
    let mut out = vec![0f64; w * h * c];
    let wx: Vec<Vec<f64>> = (0..w).map(|x| ref_weights(src.width, w, x)).collect();
    let wy: Vec<Vec<f64>> = (0..h).map(|y| ref_weights(src.height, h, y)).collect();
    for y in 0..h {
        for x in 0..w {
            let mut acc = vec![0f64; c];
            for (sy, ky) in wy[y].iter().enumerate().filter(|(_, k)| **k != 0.0) {
                for (sx, kx) in wx[x].iter().enumerate().filter(|(_, k)| **k != 0.0) {
                    let a = if alpha { src.get(sx, sy, c - 1) as f64 } else { 1.0 };
                    #[allow(clippy::needless_range_loop)] // ch indexes the source too
                    for ch in 0..c {
                        let v = src.get(sx, sy, ch) as f64;
                        let v = if alpha && ch < c - 1 { v * a } else { v };
                        acc[ch] += ky * kx * v;
                    }
                }
            }
            let a = if alpha { acc[c - 1].clamp(0.0, 1.0) } else { 1.0 };
            for ch in 0..c {
                let v = if alpha && ch < c - 1 { if a > 1e-7 { acc[ch] / a } else { 0.0 } } else { acc[ch] };
                out[(y * w + x) * c + ch] = v.clamp(0.0, 1.0);
            }
        }
    }
    out
}

fn max_diff_to_reference(src: &Raster, w: usize, h: usize) -> f64 {
    let got = resize(src.as_ref(), w, h, &Cancel::new()).unwrap();
    assert_eq!((got.width, got.height, got.channels, got.bit_depth()), (w, h, src.channels, src.bit_depth()));
    let want = reference(src, w, h);
    let c = src.channels;
    let alpha = c == 2 || c == 4;
    let mut m = 0f64;
    for y in 0..h {
        for x in 0..w {
            // Colour under (almost) no alpha is undefined: compare it scaled by alpha.
            let a = if alpha { want[(y * w + x) * c + c - 1] } else { 1.0 };
            for ch in 0..c {
                let scale = if alpha && ch < c - 1 { a } else { 1.0 };
                m = m.max((got.get(x, y, ch) as f64 - want[(y * w + x) * c + ch]).abs() * scale);
            }
        }
    }
    m
}

#[test]
fn kernel_is_lanczos3() {
    assert_eq!(lanczos3(0.0), 1.0);
    for i in 1..=3 {
        assert!(lanczos3(i as f32).abs() < 1e-6);
        assert!(lanczos3(-(i as f32)).abs() < 1e-6);
    }
    assert!(lanczos3(3.5) == 0.0 && lanczos3(0.5) > 0.6 && lanczos3(1.5) < 0.0);
}

#[test]
fn matches_direct_reference_on_random_inputs() {
    // Bound: one rounding step of the stored sample (0.5/255 or 0.5/65535) plus f32 accumulation.
    let cases: [(usize, usize, usize, usize); 7] = [
        (17, 13, 40, 29),  // upscale ~2.3x
        (40, 30, 60, 45),  // 1.5x
        (40, 30, 27, 20),  // downscale 1.5x (stretched Lanczos)
        (48, 36, 12, 9),   // 4x down (area)
        (50, 21, 7, 3),    // non-integer area ratio
        (31, 19, 31, 40),  // one axis kept, the other stretched
        (23, 29, 90, 14),  // up one way, area down the other
    ];
    for (i, &(sw, sh, w, h)) in cases.iter().enumerate() {
        for c in 1..=4 {
            let src = random_u8(sw, sh, c, 1 + i as u64 * 7 + c as u64);
            let d = max_diff_to_reference(&src, w, h);
            assert!(d <= 0.5 / 255.0 + 1e-4, "u8 {sw}x{sh}x{c} -> {w}x{h}: max diff {d} ({:.3}/255)", d * 255.0);
            let src = random_u16(sw, sh, c, 100 + i as u64 * 7 + c as u64);
            let d = max_diff_to_reference(&src, w, h);
            assert!(d <= 0.5 / 65535.0 + 1e-4, "u16 {sw}x{sh}x{c} -> {w}x{h}: max diff {d}");
        }
    }
}

#[test]
fn constants_stay_constant_and_ramps_stay_ramps() {
    for (w, h) in [(90, 70), (45, 35), (10, 8), (7, 5), (200, 3)] {
        let src = Raster::from_u8(30, 24, 3, [200u8, 17, 99].repeat(30 * 24)).unwrap();
        let out = resize(src.as_ref(), w, h, &Cancel::new()).unwrap();
        assert_eq!(out, Raster::from_u8(w, h, 3, [200u8, 17, 99].repeat(w * h)).unwrap(), "{w}x{h}");
    }
    // A horizontal ramp, upscaled 2.5x: away from the borders, the ramp at the output's centres, within
    // Lanczos3's ripple (it is not exactly linear-reproducing: up to 0.0182 px at this ratio).
    let sw = 40;
    let src = Raster::from_u16(sw, 4, 1, (0..4).flat_map(|_| (0..sw).map(|x| (x * 1000) as u16)).collect()).unwrap();
    let out = resize(src.as_ref(), 100, 10, &Cancel::new()).unwrap();
    for x in 10..90 {
        let want = ((x as f64 + 0.5) / 2.5 - 0.5) * 1000.0 / 65535.0;
        let slope = 1000.0 / 65535.0;
        assert!((out.get(x, 5, 0) as f64 - want).abs() < 0.02 * slope + 1e-5, "x {x}: {} vs {want}", out.get(x, 5, 0));
    }
}

#[test]
fn downscaling_filters_out_what_it_cannot_show() {
    // A one-pixel checkerboard has nothing below the new Nyquist limit: mid gray, not aliasing.
    let (w, h) = (64, 48);
    let src = Raster::from_u8(w, h, 1, (0..h).flat_map(|y| (0..w).map(move |x| if (x + y) % 2 == 0 { 255 } else { 0 })).collect()).unwrap();
    for (ow, oh) in [(32, 24), (16, 12), (21, 17)] {
        let out = resize(src.as_ref(), ow, oh, &Cancel::new()).unwrap();
        for y in 2..oh - 2 {
            for x in 2..ow - 2 {
                assert!((out.get(x, y, 0) - 0.5).abs() < 0.03, "{ow}x{oh} at {x},{y}: {}", out.get(x, y, 0));
            }
        }
    }
}

#[test]
fn transparent_colour_does_not_bleed() {
    // Left half opaque blue, right half fully transparent red: a straight-alpha filter would tint the
    // edge red; premultiplied, every visible pixel stays blue.
    let (w, h) = (20, 6);
    let data: Vec<u8> = (0..h).flat_map(|_| (0..w).flat_map(|x| if x < w / 2 { [0, 0, 255, 255] } else { [255, 0, 0, 0] })).collect();
    let src = Raster::from_u8(w, h, 4, data).unwrap();
    for (ow, oh) in [(50, 15), (13, 4), (5, 2)] {
        let out = resize(src.as_ref(), ow, oh, &Cancel::new()).unwrap();
        let mut edge = 0;
        for y in 0..oh {
            for x in 0..ow {
                if out.get(x, y, 3) > 2.0 / 255.0 {
                    assert!(out.get(x, y, 0) < 2.0 / 255.0, "{ow}x{oh} at {x},{y}: red {}", out.get(x, y, 0));
                    assert!(out.get(x, y, 2) > 0.98);
                    edge += (out.get(x, y, 3) < 0.99) as usize;
                }
            }
        }
        assert!(edge > 0, "{ow}x{oh}: the edge is blended");
    }
}

#[test]
fn bad_sizes_and_cancel() {
    let src = random_u8(8, 8, 3, 9);
    assert_eq!(resize(src.as_ref(), 0, 5, &Cancel::new()).unwrap_err().code, Code::InvalidArgument);
    assert_eq!(resize(src.as_ref(), 5, 0, &Cancel::new()).unwrap_err().code, Code::InvalidArgument);
    let c = Cancel::new();
    c.cancel();
    assert_eq!(resize(src.as_ref(), 20, 20, &c).unwrap_err().code, Code::Aborted);
    // Same size: the pixels as they are.
    assert_eq!(resize(src.as_ref(), 8, 8, &Cancel::new()).unwrap(), src);
}

#[test]
fn target_sizes_keep_the_aspect_ratio() {
    assert_eq!(target_size(800, 600, None, None), (800, 600));
    assert_eq!(target_size(800, 600, Some(1000), None), (1000, 750));
    assert_eq!(target_size(800, 600, None, Some(300)), (400, 300));
    assert_eq!(target_size(800, 600, Some(123), Some(45)), (123, 45));
    assert_eq!(target_size(3000, 2, Some(10), None), (10, 1), "never 0");
    assert_eq!(target_size(333, 200, Some(500), None), (500, 300));
}

// --- The photo path on a real network (skipped without ../shared) ---

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn model_dir() -> PathBuf {
    std::env::var_os("LUCENT_MODEL_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("../shared/models"))
}

fn have_data() -> bool {
    let ok = model_dir().join("sr/realesr-general-x4v3.param").exists() && root().join("../shared/data/photos").is_dir();
    if !ok {
        eprintln!("skipping: ../shared/models or ../shared/data is absent");
    }
    ok
}

fn small_png(name: &str, w: usize, h: usize) -> (Raster, Vec<u8>) {
    let bytes = std::fs::read(root().join("../shared/data/photos").join(name)).unwrap();
    let full = image_to_raster(lucent_codec::decode(&bytes, &Default::default()).unwrap()).unwrap().0;
    let c = full.channels;
    let mut data = Vec::new();
    let lucent_engine::Samples::U8(v) = &full.samples else { panic!("8-bit photo expected") };
    for y in 0..h {
        data.extend_from_slice(&v[(y * full.width) * c..(y * full.width + w) * c]);
    }
    let r = Raster::from_u8(w, h, c, data).unwrap();
    let png = lucent_codec::encode(&raster_to_image(r.clone(), Default::default()), Format::Png, &EncodeOptions::default()).unwrap();
    (r, png)
}

fn decode(bytes: &[u8]) -> Raster {
    image_to_raster(lucent_codec::decode(bytes, &Default::default()).unwrap()).unwrap().0
}

#[test]
fn enhance_to_a_target_size() {
    if !have_data() {
        return;
    }
    let e = Engine::with_backend(Arc::new(CpuBackend::new(None)), &model_dir(), None).unwrap();
    let (_, png) = small_png("0014.jpg", 24, 18);
    let opts = |tw: Option<u32>, th: Option<u32>| EnhanceOptions {
        model: "general_2x".into(),
        format: "png".into(),
        target_width: tw,
        target_height: th,
        ..Default::default()
    };
    let c = Cancel::new();
    let plain = e.enhance(&png, &opts(None, None), &c, &|_| {}).unwrap();
    assert_eq!((plain.width, plain.height), (48, 36));
    let model_out = decode(&plain.data);
    // Width alone (1.5x of the input): aspect kept; the pixels are the model's output resampled.
    for (tw, th, want) in [(Some(36), None, (36, 27)), (None, Some(54), (72, 54)), (Some(100), Some(20), (100, 20)), (Some(48), None, (48, 36))] {
        let out = e.enhance(&png, &opts(tw, th), &c, &|_| {}).unwrap();
        assert_eq!((out.width, out.height), (want.0 as u32, want.1 as u32), "{tw:?} {th:?}");
        let got = decode(&out.data);
        assert_eq!(got, resize(model_out.as_ref(), want.0, want.1, &c).unwrap(), "{tw:?} {th:?}");
    }
    // Bad sides: invalid_argument; over the model's output limit: image_too_large (before the model runs).
    let code = |o: EnhanceOptions| e.enhance(&png, &o, &c, &|_| {}).unwrap_err().code;
    assert_eq!(code(opts(Some(0), None)), Code::InvalidArgument);
    assert_eq!(code(opts(None, Some(MAX_TARGET_SIDE + 1))), Code::InvalidArgument);
    assert_eq!(code(opts(Some(MAX_TARGET_SIDE), Some(MAX_TARGET_SIDE))), Code::ImageTooLarge);
    assert_eq!(code(opts(Some(MAX_TARGET_SIDE), None)), Code::ImageTooLarge);
}
