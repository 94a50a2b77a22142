//! The ONNX goldens of tests/onnx.rs (onnxruntime outputs, scripts/onnx-goldens.py) on the wgpu
//! backend (lucent-gpu; a CPU adapter such as lavapipe is allowed, as gpu_goldens.rs does): the two
//! op graphs and u2netp (where `seg/u2netp.onnx` is fetched), prepared and run on the GPU.
//!
//! Run with f32 storage (`force_f32`): max abs error <= 1e-3 · max(1, max |onnxruntime|), the
//! issue's bound for U²-Net. Measured on lavapipe (llvmpipe, LLVM 15): ops 3.3e-6, ops2 1.5e-7,
//! u2netp 4.0e-5. With f16 storage (ONNX_GPU_F16=1 runs that instead, bound 2e-2 · max(1, max |ort|)
//! as gpu_goldens.rs) the op graphs stay within 3.1e-3 / 7.3e-4 but u2netp's map drifts to 8.5e-2
//! on a real photo: a U²-Net on the GPU needs f32 storage to match onnxruntime.
//! Skips (printing why) when LUCENT_SKIP_GPU_TESTS=1 or when no adapter can be created.

use lucent_core::options::GpuOptions;
use lucent_core::{Backend, Cancel, Tensor};
use lucent_gpu::GpuBackend;
use lucent_models::{load, Limits};
use std::path::PathBuf;
use std::sync::Arc;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/onnx")
}

fn read_f32(name: &str) -> Vec<f32> {
    std::fs::read(dir().join(name)).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// rembg's u2net input from the golden PNG, and the sampled onnxruntime values with their stride.
fn u2netp_case() -> Option<(Vec<u8>, Tensor, Vec<f32>, usize)> {
    let model_dir = std::env::var_os("LUCENT_MODEL_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/test-models"));
    let bytes = std::fs::read(model_dir.join("seg/u2netp.onnx")).ok()?;
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir().join("u2netp.json")).unwrap()).unwrap();
    let img = image::open(dir().join("u2netp.in.png")).unwrap().to_rgb8();
    let max = img.as_raw().iter().copied().max().unwrap() as f32 / 255.0;
    let (mean, std) = ([0.485f32, 0.456, 0.406], [0.229f32, 0.224, 0.225]);
    let mut data = vec![0f32; 3 * 320 * 320];
    for (i, p) in img.pixels().enumerate() {
        for c in 0..3 {
            data[c * 320 * 320 + i] = ((p[c] as f32 / 255.0) / max - mean[c]) / std[c];
        }
    }
    let want = meta["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
    Some((bytes, Tensor::from_vec(3, 320, 320, data), want, meta["stride"].as_u64().unwrap() as usize))
}

#[test]
fn onnx_goldens_on_the_gpu_backend() {
    if std::env::var("LUCENT_SKIP_GPU_TESTS").as_deref() == Ok("1") {
        println!("SKIPPED: LUCENT_SKIP_GPU_TESTS=1");
        return;
    }
    let f16 = std::env::var("ONNX_GPU_F16").as_deref() == Ok("1");
    let (force_f32, tol) = if f16 { (false, 2e-2) } else { (true, 1e-3) };
    let gpu = match GpuBackend::new(GpuOptions { allow_cpu_adapter: true, force_f32, ..Default::default() }) {
        Ok(g) => g,
        Err(e) => {
            println!("SKIPPED: no GPU adapter ({e}); adapters: {:?}", lucent_gpu::probe_adapters());
            return;
        }
    };
    println!("adapter: {} (f16 storage: {})", gpu.info().adapter, gpu.info().f16);
    let mut cases = vec![
        ("ops.onnx", std::fs::read(dir().join("ops.onnx")).unwrap(), Tensor::from_vec(3, 17, 23, read_f32("ops.in.f32")), read_f32("ops.out.f32"), 1),
        ("ops2.onnx", std::fs::read(dir().join("ops2.onnx")).unwrap(), Tensor::from_vec(3, 16, 20, read_f32("ops2.in.f32")), read_f32("ops2.out.f32"), 1),
    ];
    match u2netp_case() {
        Some((bytes, x, want, stride)) => cases.push(("u2netp.onnx", bytes, x, want, stride)),
        None => println!("SKIP u2netp: seg/u2netp.onnx is absent (`lucent models fetch seg/u2netp`)"),
    }
    for (name, bytes, x, want, stride) in cases {
        let net = Arc::new(load(&bytes, name, &Limits::default()).unwrap().net);
        let (i, o) = (net.blob("in0").unwrap(), net.blob("out0").unwrap());
        let got = gpu.prepare(net.clone()).and_then(|p| p.run(&[(i, &x)], &[o], &Cancel::new())).unwrap_or_else(|e| panic!("{name}: {e:?}")).remove(0);
        let sampled: Vec<f32> = got.data.iter().step_by(stride).copied().collect();
        assert_eq!(sampled.len(), want.len(), "{name}");
        let err = sampled.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        let peak = want.iter().fold(1f32, |m, v| m.max(v.abs()));
        println!("{name} on the GPU backend: max abs error vs onnxruntime {err:.2e} (max |onnxruntime| {peak:.2})");
        assert!(err <= tol * peak, "{name}: {err}");
    }
}
