//! The engine's options reach the backends, and the environment does not (issue 24: the crates read
//! no environment; the server passes its settings as options). One test function sets
//! `LUCENT_*` variables in this process and checks that nothing changes; the others pass options.

use lucent_core::cpu::{CpuOptions, Isa};
use lucent_engine::{BackendChoice, Engine, EngineOptions, GpuOptions};
use std::path::PathBuf;

fn model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/test-models")
}

fn cpu_engine(cpu: CpuOptions) -> Engine {
    Engine::new(EngineOptions { model_dir: model_dir(), backend: Some(BackendChoice::Cpu), cpu, ..Default::default() }).expect("cpu engine")
}

#[test]
fn cpu_options_reach_the_backend_and_the_environment_does_not() {
    let best = Isa::best();
    // The options: the ISA cap and the thread count come back in the backend's info.
    let e = cpu_engine(CpuOptions { threads: Some(1), isa: Some(Isa::Scalar), ..Default::default() });
    assert_eq!(e.info().kind, "cpu");
    assert_eq!(e.info().cpu_isa, Some("scalar"));
    assert_eq!(e.info().threads, Some(1));
    let e = cpu_engine(CpuOptions { threads: Some(2), ..Default::default() });
    assert_eq!((e.info().cpu_isa, e.info().threads), (Some(best.name()), Some(2)));

    // The environment: the settings the crates used to read change nothing now.
    std::env::set_var("LUCENT_CPU_ISA", "scalar");
    std::env::set_var("LUCENT_BACKEND", "gpu");
    std::env::set_var("LUCENT_FACE_PROFILE", "1");
    let e = Engine::new(EngineOptions { model_dir: model_dir(), backend: Some(BackendChoice::Cpu), ..Default::default() }).expect("engine");
    assert_eq!(e.info().cpu_isa, Some(best.name()), "LUCENT_CPU_ISA in the environment is not read");
    assert!(!lucent_engine::face::profile::enabled(), "LUCENT_FACE_PROFILE in the environment is not read");
    // No backend given: Auto, whatever LUCENT_BACKEND says (here: a host without a GPU device node
    // gets the CPU backend; with one, Auto may pick the GPU, which is still not "because of" the env).
    if !lucent_engine::engine::gpu_device_nodes(std::path::Path::new("/dev")) {
        let e = Engine::new(EngineOptions { model_dir: model_dir(), ..Default::default() }).expect("auto engine");
        assert_eq!(e.info().kind, "cpu", "LUCENT_BACKEND=gpu in the environment is not read");
    }
    std::env::remove_var("LUCENT_CPU_ISA");
    std::env::remove_var("LUCENT_BACKEND");
    std::env::remove_var("LUCENT_FACE_PROFILE");

    // The process-wide face profile follows the last engine's option.
    let _on = Engine::new(EngineOptions { model_dir: model_dir(), backend: Some(BackendChoice::Cpu), face_profile: true, ..Default::default() }).unwrap();
    assert!(lucent_engine::face::profile::enabled());
    let _off = cpu_engine(CpuOptions::default());
    assert!(!lucent_engine::face::profile::enabled());
}

/// `gpu.force_f32` (the server's LUCENT_GPU_F32) reaches the GPU backend: f16 off even where the
/// adapter offers SHADER_F16 (lavapipe here).
#[cfg(feature = "gpu")]
#[test]
fn gpu_f32_option_reaches_the_backend() {
    if std::env::var("LUCENT_SKIP_GPU_TESTS").as_deref() == Ok("1") {
        return;
    }
    let gpu = |force_f32| {
        Engine::new(EngineOptions {
            model_dir: model_dir(),
            backend: Some(BackendChoice::Gpu),
            gpu: GpuOptions { force_f32, ..Default::default() },
            ..Default::default()
        })
    };
    let plain = match gpu(false) {
        Ok(e) => e,
        Err(e) => panic!("no GPU adapter for the test ({e}); install lavapipe or set LUCENT_SKIP_GPU_TESTS=1"),
    };
    assert_eq!(plain.info().kind, "gpu");
    assert_eq!(plain.info().cpu_isa, None);
    let f32 = gpu(true).expect("gpu engine");
    assert!(!f32.info().f16, "force_f32: no f16 storage");
    println!("adapter {}: f16 by default {}, with force_f32 {}", plain.info().adapter, plain.info().f16, f32.info().f16);
}
