//! Measurements behind the catalog's denoise / SRMD constants (not a test: prints figures).
//!
//!   cargo run --release -p lucent-engine --example quality_eval -- est
//!   cargo run --release -p lucent-engine --example quality_eval -- denoise METHOD [--n N] [--sigmas 15,25,50]
//!       METHOD: ffdnet-true | ffdnet-est[:SCALE] | ffdnet-plain-est | cdncnn | general | detail | sharpen
//!               | usm:AMOUNT:RADIUS (FFDNet-Clip blind + USM)
//!   cargo run --release -p lucent-engine --example quality_eval -- sr MODEL   (high_fidelity_2x ...)
//!
//! Env LUCENT_MODEL_DIR: the model dir (with the converted denoisers). Noise: Gaussian, seeded
//! xorshift32 + Box-Muller (seed 1 + 1000 * sigma + image index), clipped and rounded to 8 bit:
//! the same generator as test/bench/quality.ts.

use lucent_core::cpu::CpuBackend;
use lucent_engine::pipelines::denoise::{self, Method, Usm, FFDNET, FFDNET_CLIP};
use lucent_engine::pipelines::noise::{estimate_noise, estimate_noise_clip_aware};
use lucent_engine::photo::image_to_raster;
use lucent_engine::{catalog, Cancel, DenoiseKind, Engine, Enhancer, Kind, Raster, Samples};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn decode(p: &std::path::Path) -> Raster {
    let b = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    image_to_raster(lucent_codec::decode(&b, &Default::default()).unwrap()).unwrap().0
}

struct XorShift(u32);
impl XorShift {
    fn next(&mut self) -> f64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        (x as f64 + 0.5) / 4294967296.0
    }
    fn gauss(&mut self) -> f64 {
        let (a, b) = (self.next(), self.next());
        (-2.0 * a.ln()).sqrt() * (2.0 * std::f64::consts::PI * b).cos()
    }
}

fn add_noise(r: &Raster, sigma: f64, seed: u32) -> Raster {
    let Samples::U8(v) = &r.samples else { panic!("8-bit expected") };
    let mut g = XorShift(seed);
    let n: Vec<u8> = v.iter().map(|&x| (x as f64 + sigma * g.gauss()).round().clamp(0.0, 255.0) as u8).collect();
    Raster::from_u8(r.width, r.height, r.channels, n).unwrap()
}

fn psnr_rgb(a: &Raster, b: &Raster) -> f64 {
    let (Samples::U8(x), Samples::U8(y)) = (&a.samples, &b.samples) else { panic!() };
    let mse: f64 = x.iter().zip(y).map(|(&p, &q)| (p as f64 - q as f64).powi(2)).sum::<f64>() / x.len() as f64;
    10.0 * (255.0f64 * 255.0 / mse).log10()
}

fn mcmaster() -> Vec<(String, Raster)> {
    let dir = root().join("../shared/data/denoise/McMaster");
    (1..=18).map(|i| (format!("{i}"), decode(&dir.join(format!("{i}.png"))))).collect()
}

fn arg(args: &[String], k: &str) -> Option<String> {
    args.iter().position(|a| a == k).and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let model_dir = std::env::var_os("LUCENT_MODEL_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("../shared/models"));
    let sigmas: Vec<f64> = arg(&args, "--sigmas").unwrap_or("15,25,50".into()).split(',').map(|s| s.parse().unwrap()).collect();
    let n: usize = arg(&args, "--n").map(|s| s.parse().unwrap()).unwrap_or(18);
    match args.first().map(String::as_str) {
        Some("est") => {
            let imgs = mcmaster();
            for &s in &sigmas {
                let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
                for (i, (_, img)) in imgs.iter().enumerate() {
                    let noisy = add_noise(img, s, 1 + 1000 * s as u32 + i as u32);
                    a.push(estimate_noise(noisy.as_ref(), true).sigma);
                    b.push(estimate_noise(noisy.as_ref(), false).sigma);
                    c.push(estimate_noise_clip_aware(noisy.as_ref()).sigma);
                }
                let st = |v: &[f64]| {
                    let m = v.iter().sum::<f64>() / v.len() as f64;
                    let mn = v.iter().cloned().fold(f64::MAX, f64::min);
                    let mx = v.iter().cloned().fold(f64::MIN, f64::max);
                    format!("mean {m:.2} min {mn:.2} max {mx:.2}")
                };
                println!("sigma {s}: skip-clipped {} | all patches {} | clip-aware {}", st(&a), st(&b), st(&c));
            }
            // Clean images.
            let c: Vec<f64> = imgs.iter().map(|(_, r)| estimate_noise_clip_aware(r.as_ref()).sigma).collect();
            println!("clean: {:?}", c.iter().map(|v| format!("{v:.2}")).collect::<Vec<_>>());
        }
        Some("denoise") => {
            let method = args.get(1).cloned().unwrap_or("detail".into());
            let e = Engine::with_backend(Arc::new(CpuBackend::new(None)), &model_dir, None).unwrap();
            let imgs: Vec<_> = mcmaster().into_iter().take(n).collect();
            for &s in &sigmas {
                let mut sum = 0f64;
                let mut noisy_sum = 0f64;
                let t = Instant::now();
                for (i, (_, img)) in imgs.iter().enumerate() {
                    let noisy = add_noise(img, s, 1 + 1000 * s as u32 + i as u32);
                    let est = estimate_noise_clip_aware(noisy.as_ref());
                    let blind = |scale: f64| denoise::calibrated_sigma(&est, scale);
                    let m = match method.as_str() {
                        "ffdnet-true" => Method::Ffdnet { stem: FFDNET_CLIP, sigma: s as f32, usm: None },
                        "ffdnet-plain-est" => Method::Ffdnet { stem: FFDNET, sigma: blind(1.0), usm: None },
                        "cdncnn" => Method::Dncnn { usm: None },
                        "general" => Method::GeneralX4Down,
                        "detail" | "sharpen" => {
                            let m = catalog::lookup(Kind::Photo, &format!("{method}_denoise_1x")).unwrap();
                            let out = e.run_pipeline(m, noisy.as_ref(), &Cancel::new(), &mut |_, _| {}).unwrap();
                            sum += psnr_rgb(&out, img);
                            noisy_sum += psnr_rgb(&noisy, img);
                            continue;
                        }
                        m if m.starts_with("ffdnet-est") => {
                            let sc = m.split(':').nth(1).map(|v| v.parse().unwrap()).unwrap_or(1.0);
                            Method::Ffdnet { stem: FFDNET_CLIP, sigma: blind(sc), usm: None }
                        }
                        m if m.starts_with("usm:") => {
                            let p: Vec<f32> = m.split(':').skip(1).map(|v| v.parse().unwrap()).collect();
                            Method::Ffdnet { stem: FFDNET_CLIP, sigma: blind(1.0), usm: Some(Usm { amount: p[0], radius: p[1] }) }
                        }
                        other => panic!("unknown method {other}"),
                    };
                    let out = m.run(e.runtime(), noisy.as_ref(), &Cancel::new(), &mut |_, _| {}).unwrap();
                    sum += psnr_rgb(&out, img);
                    noisy_sum += psnr_rgb(&noisy, img);
                }
                let k = imgs.len() as f64;
                println!(
                    "{method} sigma {s}: PSNR {:.2} dB (noisy {:.2}) over {} images, {:.2} s/image",
                    sum / k,
                    noisy_sum / k,
                    imgs.len(),
                    t.elapsed().as_secs_f64() / k
                );
            }
            let _ = DenoiseKind::Detail;
        }
        _ => eprintln!("usage: quality_eval est | denoise METHOD [--n N] [--sigmas 15,25,50]"),
    }
}
