//! napi bindings for the Lucent engine: the `@lucent/native` package. Thin: every call goes to
//! the ONE process-wide `lucent_engine::Engine` (shared by all worker threads of the process).
//!
//! The package's `index.js` (loader) and `index.d.ts` (types) are GENERATED from the `#[napi]`
//! items of this crate by `napi build` (scripts/build-native.mjs): change the API here, never there.
//! Here: `init`, `info`, `adapters`, `probe`; `errors.rs`: the error codes; `catalog.rs`: `catalog()`;
//! `tasks.rs`: the async `enhance` and `enhanceFrames`; `interp.rs`: the async `interpolateFrames`;
//! `models.rs`: `inspectModel` (bring your own model); `segment.rs`: the async `segment` (background
//! removal).
//!
//! Engine options: `init` takes every engine, CPU, GPU and codec setting as a typed option; the
//! crates read no environment (the server maps its `LUCENT_*` settings onto these,
//! server/engine/options.ts; another Node app passes its own). Each option's doc names the setting.
//!
//! Errors: thrown / rejected `Error`s carry `code` = the stable engine code string
//! (`EngineErrorCode`, the table in native/core/src/error.rs). Async calls take an optional
//! `AbortSignal` (aborting rejects with code `aborted`) and, for `enhance`, a progress callback
//! (a throwing callback is ignored, never fatal).

pub mod catalog;
pub mod errors;
pub mod interp;
pub mod models;
pub mod segment;
pub mod tasks;

use errors::{nerr, ErrCode};
use lucent_core::cpu::{CacheFile, ConvPolicy, CpuOptions, Isa, Precision};
use lucent_core::options::{ConvForce, Coop, GpuOptions, TuneMode};
use lucent_core::{Code, Error as CoreError};
use lucent_engine::{BackendChoice, CodecOptions, Engine, EngineOptions as EOpts};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::path::PathBuf;

/// The engine's options. The first `init` of the process builds the engine with them; the
/// codec's HEIF preset and the face profile are process-wide. Unset options take the defaults
/// listed (the server's setting of the same meaning in parentheses: docs/configuration.md).
#[napi(object)]
pub struct EngineOptions {
    /// Directory laid out like shared/models (sr/, face/, denoise/ ...).
    pub model_dir: String,
    /// Default 'auto': a real GPU adapter when present, else the CPU backend (LUCENT_BACKEND).
    #[napi(ts_type = "'auto' | 'gpu' | 'cpu'")]
    pub backend: Option<String>,
    /// The adapter: a case-insensitive substring of its name, or '#N', the N-th adapter of
    /// `adapters()` (0 the first; identical GPUs differ only there). With '#N' the backend
    /// 'auto' fails (gpu_unavailable) rather than fall back to the CPU (LUCENT_ADAPTER).
    pub adapter: Option<String>,
    /// CPU backend threads (default: all cores; LUCENT_ENGINE_THREADS).
    pub threads: Option<u32>,
    /// Force a tile side in input px (tests and benchmarks; default: the backend's max).
    pub tile: Option<u32>,
    /// A CPU adapter (lavapipe, llvmpipe, SwiftShader) may serve when no real GPU matches; 'gpu'
    /// always allows one (default false; LUCENT_GPU_ALLOW_CPU).
    pub gpu_allow_cpu: Option<bool>,
    /// f32 storage even where the adapter offers SHADER_F16 (default false; LUCENT_GPU_F32).
    pub gpu_f32: Option<bool>,
    /// The FMA GEMM accumulates in f16 too (default false; LUCENT_GPU_F16_MATH).
    pub gpu_f16_math: Option<bool>,
    /// Per-layer GPU times (and the tuner's candidates) to stderr, where TIMESTAMP_QUERY is
    /// available (default false; LUCENT_GPU_PROFILE).
    pub gpu_profile: Option<bool>,
    /// The GEMM kernels' pipelined form: double-buffered K slices (default false; LUCENT_GPU_PIPELINE).
    pub gpu_pipeline: Option<bool>,
    /// Forces the convolution kernel: 'fma', 'rb', 'rb:MC,PX', 'direct' or a GEMM tile
    /// 'BM,BN,BK,TM' (default: per adapter; LUCENT_GPU_CONV).
    pub gpu_conv: Option<String>,
    /// Cooperative matrices (tensor cores): 'off' never, 'on' also on CPU adapters, 'emulate' the
    /// emulated MMA kernel, 'auto' GPUs that list them (default; LUCENT_GPU_COOP).
    #[napi(ts_type = "'auto' | 'off' | 'on' | 'emulate'")]
    pub gpu_coop: Option<String>,
    /// Measured kernel choice at prepare time: 'off', 'on' (CPU adapters too), 'auto' (default:
    /// GPUs, unless gpuConv or gpuPipeline ask for a kernel or form; LUCENT_GPU_TUNE).
    #[napi(ts_type = "'auto' | 'off' | 'on'")]
    pub gpu_tune: Option<String>,
    /// The tuner's probe side in px (>= 8; turns tuning on; LUCENT_GPU_TUNE=SIDE).
    pub gpu_tune_side: Option<u32>,
    /// File keeping the measured kernel choices across restarts; '' none (default
    /// $XDG_CACHE_HOME/lucent/gpu-tune.tsv or ~/.cache/lucent/gpu-tune.tsv; LUCENT_GPU_TUNE_CACHE).
    pub gpu_tune_cache: Option<String>,
    /// Deadline of one wait on the GPU in seconds (default 600, 3600 on CPU adapters; LUCENT_GPU_TIMEOUT_S).
    pub gpu_timeout_s: Option<u32>,
    /// Caps the SIMD level of the CPU kernels (default: the best this CPU runs; a level it lacks
    /// gives the best it has; LUCENT_CPU_ISA).
    #[napi(ts_type = "'scalar' | 'avx2' | 'avx512'")]
    pub cpu_isa: Option<String>,
    /// 3x3 convolutions: 'measure' which is faster per layer (default), 'winograd', 'im2col'
    /// (LUCENT_CPU_WINOGRAD).
    #[napi(ts_type = "'measure' | 'winograd' | 'im2col'")]
    pub cpu_winograd: Option<String>,
    /// Arithmetic of the CPU convolutions: 'fp32'; 'bf16' (bf16 inputs and weights, fp32 sums, per
    /// layer where measured faster; fp32 on a CPU without AVX512-BF16 or AMX); 'int8' (not yet:
    /// fp32); 'auto' (default: per network from the committed quality measurements;
    /// LUCENT_CPU_PRECISION). info().cpuPrecision says what runs.
    #[napi(ts_type = "'fp32' | 'bf16' | 'int8' | 'auto'")]
    pub cpu_precision: Option<String>,
    /// Winograd tiles per work item (default 64; process-wide; LUCENT_CPU_WINO_CHUNK).
    pub cpu_wino_chunk: Option<u32>,
    /// Keep Winograd input transforms across the convolutions of a dense block (default true;
    /// false for comparisons; LUCENT_CPU_KEEP_TRANSFORMS).
    pub cpu_keep_transforms: Option<bool>,
    /// Per-op-kind CPU times of every run to stderr (default false; LUCENT_CPU_PROFILE).
    pub cpu_profile: Option<bool>,
    /// File keeping the measured Winograd/im2col choices across processes; '' none (default
    /// $XDG_CACHE_HOME/lucent/cpu-calibration.tsv or ~/.cache/lucent/cpu-calibration.tsv;
    /// process-wide; LUCENT_CPU_CALIBRATION_CACHE).
    pub cpu_calibration_cache: Option<String>,
    /// x265 preset of HEIF output: lowercase letters; an unknown one: the encoder's own (default
    /// 'ultrafast'; process-wide; LUCENT_HEIF_PRESET).
    pub heif_preset: Option<String>,
    /// Every frame of a face model prints where its time went to stderr (default false;
    /// process-wide; LUCENT_FACE_PROFILE).
    pub face_profile: Option<bool>,
}

#[napi(object)]
pub struct EngineInfo {
    #[napi(ts_type = "'gpu' | 'cpu'")]
    pub backend: String,
    /// Adapter name, or 'cpu'.
    pub adapter: String,
    /// shader-f16 in use.
    pub f16: bool,
    /// The CPU backend's SIMD level ('scalar', 'avx2+fma', 'avx512f'); absent on the GPU.
    pub cpu_isa: Option<String>,
    /// The CPU backend's worker threads; absent on the GPU.
    pub threads: Option<u32>,
    /// What the CPU convolutions run ('fp32', 'bf16 (amx-bf16) ...', or fp32 and why a narrower
    /// precision asked for does not run); absent on the GPU.
    pub cpu_precision: Option<String>,
}

/// One GPU adapter as wgpu enumerates it.
#[napi(object)]
pub struct AdapterEntry {
    /// Its position in the enumeration: `adapter: '#N'` (LUCENT_ADAPTER=#N) opens this one.
    pub index: u32,
    pub name: String,
    /// wgpu's backend: 'Vulkan', 'Metal', 'Dx12'.
    pub backend: String,
    #[napi(ts_type = "'discrete' | 'integrated' | 'virtual' | 'cpu' | 'other'")]
    pub device_type: String,
}

#[napi(object)]
pub struct ProbeResult {
    pub format: String,
    pub width: u32,
    pub height: u32,
    pub channels: u32,
    pub bit_depth: u32,
}

fn info_of(e: &Engine) -> EngineInfo {
    let i = e.info();
    EngineInfo {
        backend: i.kind.to_string(),
        adapter: i.adapter.clone(),
        f16: i.f16,
        cpu_isa: i.cpu_isa.map(str::to_string),
        threads: i.threads.map(|t| t as u32),
        cpu_precision: i.cpu_precision.clone(),
    }
}

fn invalid(what: &str, v: &str, expected: &str) -> CoreError {
    CoreError::new(Code::InvalidArgument, format!("{what} '{v}': expected {expected}"))
}

/// The addon's options as the engine's (an unknown enum value: invalid_argument).
fn engine_options(o: EngineOptions) -> lucent_core::Result<EOpts> {
    let backend = o.backend.as_deref().map(BackendChoice::parse).transpose()?;
    let isa = match o.cpu_isa.as_deref() {
        None => None,
        Some(s) => Some(Isa::parse(s).ok_or_else(|| invalid("cpuIsa", s, "scalar, avx2 or avx512"))?),
    };
    let policy = match o.cpu_winograd.as_deref() {
        None | Some("measure") => ConvPolicy::Measure,
        Some("winograd") => ConvPolicy::Winograd,
        Some("im2col") => ConvPolicy::Im2col,
        Some(s) => return Err(invalid("cpuWinograd", s, "measure, winograd or im2col")),
    };
    let precision = match o.cpu_precision.as_deref() {
        None => Precision::Auto,
        Some(s) => Precision::parse(s).ok_or_else(|| invalid("cpuPrecision", s, "fp32, bf16, int8 or auto"))?,
    };
    let coop = match o.gpu_coop.as_deref() {
        None | Some("auto") => Coop::Auto,
        Some(s @ ("off" | "on" | "emulate")) => Coop::parse(s),
        Some(s) => return Err(invalid("gpuCoop", s, "auto, off, on or emulate")),
    };
    let tune = match (o.gpu_tune.as_deref(), o.gpu_tune_side) {
        (Some("off"), _) => TuneMode::Off,
        (_, Some(side)) if side >= 8 => TuneMode::Side(side),
        (_, Some(side)) => return Err(invalid("gpuTuneSide", &side.to_string(), "at least 8 px")),
        (None | Some("auto"), None) => TuneMode::Auto,
        (Some("on"), None) => TuneMode::On,
        (Some(s), None) => return Err(invalid("gpuTune", s, "auto, off or on")),
    };
    let cpu = CpuOptions {
        threads: o.threads.map(|t| t as usize),
        isa,
        policy,
        wino_chunk: o.cpu_wino_chunk.map(|n| n as usize).filter(|&n| n > 0),
        keep_transforms: o.cpu_keep_transforms.unwrap_or(true),
        profile: o.cpu_profile.unwrap_or(false),
        calibration_cache: o.cpu_calibration_cache.as_deref().map(CacheFile::from_setting).unwrap_or_default(),
        precision,
        bf16_kernel: None,
        layer_precision: Vec::new(),
    };
    let gpu = GpuOptions {
        adapter_name: o.adapter.filter(|s| !s.is_empty()),
        allow_cpu_adapter: o.gpu_allow_cpu.unwrap_or(false),
        force_f32: o.gpu_f32.unwrap_or(false),
        f16_math: o.gpu_f16_math.unwrap_or(false),
        profile: o.gpu_profile.unwrap_or(false),
        pipeline: o.gpu_pipeline.unwrap_or(false),
        conv: o.gpu_conv.as_deref().map(ConvForce::parse),
        coop,
        tune,
        tune_cache: o.gpu_tune_cache.as_deref().map(CacheFile::from_setting).unwrap_or_default(),
        timeout: o.gpu_timeout_s.filter(|&s| s > 0).map(|s| std::time::Duration::from_secs(s.into())),
    };
    Ok(EOpts {
        model_dir: PathBuf::from(o.model_dir),
        backend,
        cpu,
        gpu,
        codec: CodecOptions { heif_preset: o.heif_preset.filter(|s| !s.is_empty()) },
        face_profile: o.face_profile.unwrap_or(false),
        tile: o.tile.map(|t| t as usize),
    })
}

/// Initialise the process-wide engine (idempotent: later calls return the same engine's info).
#[napi]
pub fn init(opts: EngineOptions) -> Result<EngineInfo, ErrCode> {
    let e = Engine::init(engine_options(opts).map_err(nerr)?).map_err(nerr)?;
    Ok(info_of(e))
}

/// The initialised engine's backend.
#[napi]
pub fn info() -> Result<EngineInfo, ErrCode> {
    Ok(info_of(Engine::global().map_err(nerr)?))
}

/// Every GPU adapter wgpu sees, CPU ones (lavapipe) included, in its enumeration order (stable on
/// one host with the same devices); empty without the GPU backend. Needs no `init`.
#[napi]
pub fn adapters() -> Vec<AdapterEntry> {
    #[cfg(feature = "gpu")]
    {
        lucent_gpu::adapters()
            .into_iter()
            .enumerate()
            .map(|(i, a)| AdapterEntry { index: i as u32, name: a.name, backend: a.backend, device_type: a.device_type })
            .collect()
    }
    #[cfg(not(feature = "gpu"))]
    Vec::new()
}

/// Format and size of an encoded image, from its header.
#[napi]
pub fn probe(data: Buffer) -> Result<ProbeResult, ErrCode> {
    let p = lucent_engine::probe(&data).map_err(nerr)?;
    Ok(ProbeResult {
        format: p.format.extension().to_string(),
        width: p.width,
        height: p.height,
        channels: p.channels as u32,
        bit_depth: p.bit_depth as u32,
    })
}

/// Drop the network loaded from `path` (the `network.path` an own model's jobs gave `enhance` /
/// `enhanceFrames`): the engine frees it, and a later call naming the path loads it again. Used
/// when an operator removes a model of their own. False when it was not loaded.
#[napi]
pub fn forget_network(path: String) -> Result<bool, ErrCode> {
    Ok(Engine::global().map_err(nerr)?.runtime().forget(&path))
}
