//! The goldens of tests/goldens.rs (torch + spandrel outputs, scripts/byom-goldens.py) on the wgpu
//! backend (lucent-gpu; a CPU adapter such as lavapipe is allowed, as native/gpu's tests do): the
//! first file of every golden config, prepared and run on the GPU, against torch's output.
//!
//! Bound: max abs error <= 2e-2 · max(1, max |torch|). The GPU keeps activations in f16 where the
//! adapter has SHADER_F16 (lavapipe does): a stored value carries up to 2^-11 relative rounding,
//! so an output of magnitude 48 (SPAN x4 with its x255 input normalisation and random weights) is
//! itself only representable to ±0.016; outputs in [0, 1] keep the plain 2e-2 absolute bound.
//! Measured on lavapipe (Mesa 26): ESRGAN <= 1.7e-4, Compact / RealPLKSR <= 7.3e-4, SPAN 3.2e-2 at
//! max |torch| 48, SwinIR <= 1.4e-3 (max |torch| 1.7), DAT <= 4.3e-4, SAFMN <= 1.5e-3, HAT <= 6.6e-4.
//!
//! Every architecture of the goldens must run: the convolutional ones (ESRGAN, Compact, SPAN,
//! RealPLKSR, SAFMN) and the transformers (SwinIR, DAT, HAT: LayerNorm, GELU, reflect padding,
//! window, channel and overlapping cross-attention, native/gpu/src/ops/{attention,overlap}.rs). A network the GPU backend cannot run
//! must fail with `model_invalid` at prepare or run time, never panic; it is listed and fails
//! the test when its architecture is one of these.
//!
//! Skips (printing why) when LUCENT_SKIP_GPU_TESTS=1 or when no adapter can be created (no Vulkan
//! driver at all: install mesa-vulkan-drivers for lavapipe).

use lucent_core::options::GpuOptions;
use lucent_core::{Backend, Cancel, Code, Tensor};
use lucent_gpu::GpuBackend;
use lucent_models::{load, Limits};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

const TOL: f32 = 2e-2;
/// Architectures (as detected) that must run on the GPU.
const ARCHS: [&str; 8] = ["ESRGAN", "Compact", "SPAN", "PLKSR", "SwinIR", "DAT", "SAFMN", "HAT"];

mod common;
use common::{dir, read_f32, shape3};

#[test]
fn gpu_goldens_match_torch_and_spandrel() {
    if std::env::var("LUCENT_SKIP_GPU_TESTS").as_deref() == Ok("1") {
        println!("SKIPPED: LUCENT_SKIP_GPU_TESTS=1");
        return;
    }
    let gpu = match GpuBackend::new(GpuOptions { allow_cpu_adapter: true, ..Default::default() }) {
        Ok(g) => g,
        Err(e) => {
            println!("SKIPPED: no GPU adapter ({e}); adapters: {:?}", lucent_gpu::probe_adapters());
            return;
        }
    };
    let info = gpu.info();
    println!("adapter: {} (f16 storage: {})", info.adapter, info.f16);
    let index: Value = serde_json::from_str(&std::fs::read_to_string(dir().join("index.json")).unwrap()).unwrap();
    let mut failures = Vec::new();
    let mut unsupported = Vec::new();
    // architecture -> outputs checked
    let mut ran: BTreeMap<String, usize> = BTreeMap::new();
    let mut worst = 0f32;
    for cfg in index["configs"].as_array().unwrap() {
        let name = cfg["name"].as_str().unwrap();
        // One file per config: the files of a config are the same network in other containers.
        let f = &cfg["files"].as_array().unwrap()[0];
        let file = f["file"].as_str().unwrap();
        let bytes = std::fs::read(dir().join(file)).unwrap();
        let m = load(&bytes, file, &Limits::default()).unwrap_or_else(|e| panic!("{file}: {e}"));
        let arch = m.info.architecture.to_string();
        ran.entry(arch.clone()).or_default();
        let net = Arc::new(m.net);
        let (inb, outb) = (net.blob("in0").unwrap(), net.blob("out0").unwrap());
        let prepared = match gpu.prepare(net.clone()) {
            Ok(p) => p,
            Err(e) => {
                assert_eq!(e.code, Code::ModelInvalid, "{file}: an unsupported network is model_invalid: {e}");
                println!("{name}: not supported by the GPU backend: {e}");
                unsupported.push(format!("{name} ({arch}): {}", e.message));
                continue;
            }
        };
        let dtype = f["dtype"].as_str().unwrap();
        for case in cfg["cases"].as_array().unwrap().iter().filter(|c| c["dtype"] == dtype) {
            let (c, h, w) = shape3(&case["input_shape"]);
            let x = Tensor::from_vec(c, h, w, read_f32(case["input"].as_str().unwrap()));
            let (oc, oh, ow) = shape3(&case["output_shape"]);
            let want = read_f32(case["output"].as_str().unwrap());
            let got = match prepared.run(&[(inb, &x)], &[outb], &Cancel::new()) {
                Ok(mut v) => v.remove(0),
                Err(e) => {
                    assert_eq!(e.code, Code::ModelInvalid, "{file}: a run the GPU backend cannot do is model_invalid: {e}");
                    println!("{name}: not supported by the GPU backend: {e}");
                    unsupported.push(format!("{name} ({arch}): {}", e.message));
                    break;
                }
            };
            assert_eq!((got.c, got.h, got.w), (oc, oh, ow), "{file}: output shape");
            let err = got.data.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            let peak = want.iter().fold(0f32, |m, v| m.max(v.abs()));
            println!("{name} {file} {}: max abs error gpu {err:.2e} (max |torch| {peak:.2})", case["input"]);
            if err.is_nan() || err > TOL * peak.max(1.0) {
                failures.push(format!("{file} on {}: max abs error {err:.3e} (max |torch| {peak:.2})", case["input"]));
            }
            worst = worst.max(err);
            *ran.get_mut(&arch).unwrap() += 1;
        }
    }
    println!("outputs checked per architecture: {ran:?}; worst max abs error {worst:.2e} (bound {TOL:e} x max(1, max |torch|))");
    println!("not supported by the GPU backend: {unsupported:#?}");
    assert!(failures.is_empty(), "{failures:#?}");
    for arch in ARCHS {
        assert!(ran.get(arch).is_some_and(|&n| n > 0), "{arch}: no golden ran on the GPU ({unsupported:#?})");
        assert!(!unsupported.iter().any(|u| u.contains(&format!("({arch})"))), "{arch}: a golden did not run on the GPU ({unsupported:#?})");
    }
}
