//! The GPU options from the `LUCENT_*` environment of a test or example run (the crate itself
//! reads none: this is the process boundary of the test binaries and examples, like the bench
//! CLI's `main`). scripts/mesa-coop.sh runs tests with `LUCENT_GPU_COOP=1`; device checks set
//! `LUCENT_GPU_CONV`, `LUCENT_GPU_TUNE` and the like.

use lucent_gpu::{CacheFile, ConvForce, Coop, GpuOptions, TuneMode};

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn flag(name: &str) -> bool {
    var(name).is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// `allow_cpu_adapter` as given (tests allow lavapipe; the bench example asks
/// `LUCENT_GPU_ALLOW_CPU`), the rest from the environment.
pub fn gpu_options_from_env(allow_cpu_adapter: bool) -> GpuOptions {
    GpuOptions {
        adapter_name: var("LUCENT_ADAPTER").filter(|s| !s.is_empty()),
        allow_cpu_adapter: allow_cpu_adapter || flag("LUCENT_GPU_ALLOW_CPU"),
        force_f32: flag("LUCENT_GPU_F32"),
        f16_math: flag("LUCENT_GPU_F16_MATH"),
        profile: flag("LUCENT_GPU_PROFILE"),
        pipeline: flag("LUCENT_GPU_PIPELINE"),
        conv: var("LUCENT_GPU_CONV").map(|v| ConvForce::parse(&v)),
        coop: var("LUCENT_GPU_COOP").map(|v| Coop::parse(&v)).unwrap_or_default(),
        tune: var("LUCENT_GPU_TUNE").map(|v| TuneMode::parse(&v)).unwrap_or_default(),
        tune_cache: std::env::var_os("LUCENT_GPU_TUNE_CACHE").map(|v| CacheFile::from_setting(&v.to_string_lossy())).unwrap_or_default(),
        timeout: var("LUCENT_GPU_TIMEOUT_S").and_then(|v| v.trim().parse::<u64>().ok()).map(std::time::Duration::from_secs),
    }
}
