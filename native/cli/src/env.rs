//! The engine's options from the `LUCENT_*` environment: this binary's process boundary (the
//! crates read no environment; the server does the same mapping from its settings schema,
//! server/settings.ts, and passes the addon typed options). Same names and forms as there:
//! docs/configuration.md. Flags are `1` / `true`; `LUCENT_CPU_PROFILE` is on when set at all, and
//! `LUCENT_CPU_KEEP_TRANSFORMS` off only at `0`, as the settings document.

use lucent_core::cpu::{CacheFile, ConvPolicy, CpuOptions, Isa, Precision};
use lucent_core::options::{ConvForce, Coop, GpuOptions, TuneMode};
use lucent_engine::{CodecOptions, EngineOptions};

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

fn flag(name: &str) -> bool {
    var(name).is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

fn cache(name: &str) -> CacheFile {
    std::env::var_os(name).map(|v| CacheFile::from_setting(&v.to_string_lossy())).unwrap_or_default()
}

/// `LUCENT_CPU_*` (threads come from `--threads`).
pub fn cpu_options(threads: Option<usize>) -> CpuOptions {
    CpuOptions {
        threads,
        isa: var("LUCENT_CPU_ISA").and_then(|s| {
            let isa = Isa::parse(&s);
            if isa.is_none() {
                eprintln!("LUCENT_CPU_ISA={s}: unknown (scalar, avx2, avx512), using the best this CPU runs");
            }
            isa
        }),
        policy: var("LUCENT_CPU_WINOGRAD").map(|v| ConvPolicy::from_setting(&v)).unwrap_or_default(),
        wino_chunk: var("LUCENT_CPU_WINO_CHUNK").and_then(|v| v.parse().ok()).filter(|&n| n > 0),
        keep_transforms: var("LUCENT_CPU_KEEP_TRANSFORMS").as_deref() != Some("0"),
        profile: std::env::var_os("LUCENT_CPU_PROFILE").is_some(),
        calibration_cache: cache("LUCENT_CPU_CALIBRATION_CACHE"),
        precision: var("LUCENT_CPU_PRECISION")
            .and_then(|s| {
                let p = Precision::parse(&s);
                if p.is_none() {
                    eprintln!("LUCENT_CPU_PRECISION={s}: unknown (fp32, bf16, int8, auto), using auto");
                }
                p
            })
            .unwrap_or_default(),
        bf16_kernel: None,
        layer_precision: Vec::new(),
    }
}

/// `LUCENT_ADAPTER` and `LUCENT_GPU_*`.
pub fn gpu_options() -> GpuOptions {
    GpuOptions {
        adapter_name: var("LUCENT_ADAPTER"),
        allow_cpu_adapter: flag("LUCENT_GPU_ALLOW_CPU"),
        force_f32: flag("LUCENT_GPU_F32"),
        f16_math: flag("LUCENT_GPU_F16_MATH"),
        profile: flag("LUCENT_GPU_PROFILE"),
        pipeline: flag("LUCENT_GPU_PIPELINE"),
        conv: var("LUCENT_GPU_CONV").map(|v| ConvForce::parse(&v)),
        coop: var("LUCENT_GPU_COOP").map(|v| Coop::parse(&v)).unwrap_or_default(),
        tune: var("LUCENT_GPU_TUNE").map(|v| TuneMode::parse(&v)).unwrap_or_default(),
        tune_cache: cache("LUCENT_GPU_TUNE_CACHE"),
        timeout: var("LUCENT_GPU_TIMEOUT_S").and_then(|v| v.parse::<u64>().ok()).filter(|&s| s > 0).map(std::time::Duration::from_secs),
    }
}

/// Everything but the model dir, backend and tile (the command line's).
pub fn engine_options(threads: Option<usize>) -> EngineOptions {
    EngineOptions {
        cpu: cpu_options(threads),
        gpu: gpu_options(),
        codec: CodecOptions { heif_preset: var("LUCENT_HEIF_PRESET") },
        face_profile: var("LUCENT_FACE_PROFILE").is_some_and(|v| v != "0"),
        ..Default::default()
    }
}
