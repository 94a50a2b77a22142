//! Timing of one network on the GPU backend (figures only; not a test).
//! `cargo run --release -p lucent-gpu --example bench -- [model stem] [width] [height] [runs]`
//! e.g. `bench realesr-general-x4v3 1920 1080 10`. Uses a CPU adapter only when
//! LUCENT_GPU_ALLOW_CPU=1. LUCENT_GPU_PROFILE=1 prints per-layer GPU times (and every tuning
//! candidate's time); the kernel each convolution shape was tuned to is printed after prepare.
use lucent_core::ncnn::Net;
use lucent_core::{Backend, Cancel, Tensor};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

// The options from the LUCENT_GPU_* environment: the example's process boundary (tests/common/env.rs).
#[path = "../tests/common/env.rs"]
mod env;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let stem = a.get(1).cloned().unwrap_or_else(|| "realesr-general-x4v3".into());
    let w: usize = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(256);
    let h: usize = a.get(3).and_then(|s| s.parse().ok()).unwrap_or(w);
    let runs: usize = a.get(4).and_then(|s| s.parse().ok()).unwrap_or(3);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/models/sr");
    let net = Arc::new(Net::load_stem(&dir.join(&stem)).expect("model"));
    for (name, coop, subgroup, props) in lucent_gpu::probe_coop() {
        println!("adapter {name}: EXPERIMENTAL_COOPERATIVE_MATRIX {coop}, SUBGROUP {subgroup}, configurations {props:?}");
    }
    let be = lucent_gpu::GpuBackend::new(env::gpu_options_from_env(false)).expect("GPU backend");
    println!(
        "adapter {} ({}), f16 {}, cooperative matrices {:?}, MMA plan {:?} tile {:?}, FMA tile {:?}, max_tile {}",
        be.adapter_name(),
        be.device_type(),
        be.settings().f16,
        be.coop_frag(),
        be.settings().mma,
        be.mma_cfg(),
        be.conv_cfg(),
        be.max_tile(&net)
    );
    let t = Instant::now();
    let p = be.prepare_gpu(net.clone()).expect("prepare");
    println!("prepare: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    for t in p.tuning().expect("tuning") {
        println!("tuned {} ({} layers{}): {}", t.shape, t.layers.len(), if t.cached { ", cached" } else { "" }, t.chosen);
    }
    let x = Tensor::from_vec(3, h, w, (0..3 * h * w).map(|i| ((i * 7919) % 1000) as f32 / 1000.0).collect());
    let (i, o) = (net.input_blobs()[0], *net.output_blobs().last().unwrap());
    for r in 0..runs {
        let t = Instant::now();
        let out = lucent_core::Prepared::run(&p, &[(i, &x)], &[o], &Cancel::new()).expect("run");
        println!("run {r}: {w}x{h} -> {}x{}: {:.1} ms", out[0].w, out[0].h, t.elapsed().as_secs_f64() * 1e3);
    }
}
