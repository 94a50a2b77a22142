//! The process-wide engine: the backend chosen from the options, the [`Runtime`] on it, and the
//! entry points the addon (native/node) and the bench CLI (native/cli) call:
//!
//! - [`Engine::enhance`]: photo bytes in, encoded bytes out (photo.rs)
//! - [`Engine::enhance_frames`]: a batch of RGB24 video frames, with optional per-video state (video.rs)
//! - [`Engine::interpolate_frames`]: frame-rate conversion of a batch of RGB24 frames with RIFE (video.rs)
//! - [`Engine::run_pipeline`] / [`Engine::run_model`]: decoded pixels through a catalog model
//! - [`probe`]: an image header
//!
//! Every entry point turns a panic into an `internal` error ([`guard`]).

use crate::catalog::{self, Kind, ModelInfo};
use crate::photo::{self, map_codec, EnhanceOptions, EnhanceOutput};
use crate::pipelines::{self, VideoState};
use crate::precision::CpuPrecisions;
use crate::raster::{Raster, RasterRef};
use crate::runtime::{lock, Runtime};
use crate::video::{self, Frames, FramesOutput, InterpOutput};
pub use lucent_codec::CodecOptions;
pub use lucent_core::cpu::{CpuOptions, Precision};
pub use lucent_core::options::GpuOptions;
use lucent_core::{Backend, BackendInfo, Cancel, Code, Error, Result};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// A real GPU adapter when present, else the CPU backend (a software Vulkan adapter such as
    /// lavapipe is never picked by `Auto`).
    Auto,
    /// The wgpu backend; a software adapter is accepted when no hardware one exists.
    Gpu,
    Cpu,
}

impl BackendChoice {
    pub fn parse(s: &str) -> Result<BackendChoice> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Ok(BackendChoice::Auto),
            "gpu" => Ok(BackendChoice::Gpu),
            "cpu" => Ok(BackendChoice::Cpu),
            other => Err(Error::new(Code::InvalidArgument, format!("backend '{other}': expected auto, gpu or cpu"))),
        }
    }
}

/// What the engine is built with. The crates read no `LUCENT_*` environment: the caller fills
/// these (the addon from its init options, which the server fills from its settings; the bench
/// CLI from the environment at its `main`). `Default` is the behaviour without any setting.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// Directory laid out like shared/models (sr/, face/, denoise/ ...).
    pub model_dir: PathBuf,
    /// `LUCENT_BACKEND`; None: Auto.
    pub backend: Option<BackendChoice>,
    /// The CPU backend's options (threads, ISA cap, Winograd policy ...).
    pub cpu: CpuOptions,
    /// The GPU backend's options (adapter name, CPU adapters allowed, f16, kernels ...); without
    /// the `gpu` feature only `allow_cpu_adapter` counts (for `Auto`'s probe).
    pub gpu: GpuOptions,
    /// The codec's options (HEIF preset); process-wide, applied when an engine is built.
    pub codec: CodecOptions,
    /// Per-frame timing of face models to stderr (`LUCENT_FACE_PROFILE`); process-wide, applied
    /// when an engine is built.
    pub face_profile: bool,
    /// Force this tile side (input px) instead of the backend's `max_tile` (tests, benchmarks).
    pub tile: Option<usize>,
}

pub struct Engine {
    rt: Runtime,
}

static ENGINE: OnceLock<Engine> = OnceLock::new();
static INIT_LOCK: Mutex<()> = Mutex::new(());

/// Run `f`, turning a panic into an `internal` error.
pub fn guard<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::new(Code::Internal, format!("{what} panicked: {msg}")))
        }
    }
}

/// Build the backend the options ask for.
pub fn make_backend(opts: &EngineOptions) -> Result<Arc<dyn Backend>> {
    match opts.backend.unwrap_or(BackendChoice::Auto) {
        BackendChoice::Cpu => cpu_backend(&opts.cpu),
        BackendChoice::Gpu => gpu_backend(&GpuOptions { allow_cpu_adapter: true, ..opts.gpu.clone() }),
        // An adapter chosen by index (`LUCENT_ADAPTER=#N`, lucent_gpu::AdapterPick): that adapter or
        // its error (gpu_unavailable), never a silent fall back to the CPU: a host with several
        // GPUs runs one worker per adapter, and a worker pinned to a missing one must say so.
        BackendChoice::Auto if opts.gpu.adapter_name.as_deref().is_some_and(|s| s.trim_start().starts_with('#')) => gpu_backend(&opts.gpu),
        // No GPU device on this host: `Auto` could only find a software adapter, which it never
        // picks, so the Vulkan probe (35 ms on 2 quiet cores, 250 ms loaded: loader, layers, drivers)
        // is skipped.
        BackendChoice::Auto if !auto_may_find_gpu(opts.gpu.allow_cpu_adapter) => cpu_backend(&opts.cpu),
        BackendChoice::Auto => match gpu_backend(&opts.gpu) {
            Ok(b) => Ok(b),
            Err(_) => cpu_backend(&opts.cpu),
        },
    }
}

/// Whether `Auto` can find an adapter it would use. On Linux every hardware Vulkan driver opens a
/// device node: /dev/dri/renderD* or card* (Mesa: radv, anv, nvk, turnip, panvk ...),
/// /dev/nvidia* (NVIDIA's driver), /dev/dxg (WSL2); where none exists, only software adapters
/// (lavapipe, SwiftShader) can show up, and `Auto` takes one only with
/// [`GpuOptions::allow_cpu_adapter`] (`LUCENT_GPU_ALLOW_CPU=1`). Elsewhere (macOS, Windows) always true.
fn auto_may_find_gpu(allow_cpu_adapter: bool) -> bool {
    if !cfg!(target_os = "linux") || allow_cpu_adapter {
        return true;
    }
    gpu_device_nodes(std::path::Path::new("/dev"))
}

/// A GPU device node under `dev` (see [`auto_may_find_gpu`]).
pub fn gpu_device_nodes(dev: &std::path::Path) -> bool {
    let dri = std::fs::read_dir(dev.join("dri"))
        .map(|d| {
            d.flatten().any(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                n.starts_with("renderD") || n.starts_with("card")
            })
        })
        .unwrap_or(false);
    dri || dev.join("dxg").exists()
        || std::fs::read_dir(dev).map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("nvidia"))).unwrap_or(false)
}

fn cpu_backend(o: &CpuOptions) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(lucent_core::cpu::CpuBackend::with_options(o)))
}

#[cfg(feature = "gpu")]
fn gpu_backend(o: &GpuOptions) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(lucent_gpu::GpuBackend::new(o.clone())?))
}

#[cfg(not(feature = "gpu"))]
fn gpu_backend(_o: &GpuOptions) -> Result<Arc<dyn Backend>> {
    Err(Error::new(Code::GpuUnavailable, "this build has no GPU backend (feature `gpu` off)"))
}

impl Engine {
    /// A private engine (tests, the CLI). Most callers want [`Engine::init`]. The process-wide
    /// options (codec, face profile) are applied here: the last engine built sets them.
    pub fn new(opts: EngineOptions) -> Result<Engine> {
        guard("engine init", || {
            lucent_codec::configure(&opts.codec);
            crate::pipelines::face::profile::set_enabled(opts.face_profile);
            let backend = make_backend(&opts)?;
            let rt = Runtime::new(backend, &opts.model_dir, opts.tile)?;
            // `auto` (the default) on the CPU: each network's precision from the committed table;
            // an explicit `int8` or `bf16`: every network, with the table's per-layer rule where it
            // has one; `fp32`: the one backend.
            let rt = match opts.cpu.precision {
                Precision::Auto => rt.with_cpu_precisions(CpuPrecisions::auto(opts.cpu.clone())),
                p @ (Precision::Int8 | Precision::Bf16) => rt.with_cpu_precisions(CpuPrecisions::auto(opts.cpu.clone()).all(p)),
                Precision::Fp32 => rt,
            };
            Ok(Engine { rt })
        })
    }

    /// An engine on a given backend (tests, benchmarks); `tile` as [`EngineOptions::tile`].
    pub fn with_backend(backend: Arc<dyn Backend>, model_dir: &std::path::Path, tile: Option<usize>) -> Result<Engine> {
        Ok(Engine { rt: Runtime::new(backend, model_dir, tile)? })
    }

    /// Initialise the process-wide engine; later calls return the existing one (their options are
    /// ignored).
    pub fn init(opts: EngineOptions) -> Result<&'static Engine> {
        if let Some(e) = ENGINE.get() {
            return Ok(e);
        }
        let _g = lock(&INIT_LOCK);
        if let Some(e) = ENGINE.get() {
            return Ok(e);
        }
        let e = Engine::new(opts)?;
        Ok(ENGINE.get_or_init(|| e))
    }

    /// The process-wide engine, if initialised.
    pub fn global() -> Result<&'static Engine> {
        ENGINE.get().ok_or_else(|| Error::new(Code::InvalidArgument, "engine not initialised: call init() first"))
    }

    /// What the pipelines run against (backend, networks, tile side).
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    pub fn info(&self) -> &BackendInfo {
        self.rt.info()
    }

    /// Photo: decode `bytes`, run the photo model `opts.model`, encode. `progress` gets 0..=100.
    pub fn enhance(&self, bytes: &[u8], opts: &EnhanceOptions, cancel: &Cancel, progress: &dyn Fn(u32)) -> Result<EnhanceOutput> {
        guard("enhance", || photo::enhance(&self.rt, bytes, opts, cancel, progress))
    }

    /// Video: `frames` through video model `model`. `state` carries the per-video state (face
    /// tracks) across the batches of one video: pass the same one (or one restored with
    /// [`VideoState::from_bytes`]) with every batch; None smooths within this batch only.
    pub fn enhance_frames(&self, frames: Frames<'_>, model: &str, state: Option<&mut VideoState>, cancel: &Cancel) -> Result<FramesOutput> {
        guard("enhance_frames", || video::enhance_frames(&self.rt, frames, model, state, cancel))
    }

    /// Video frame-rate conversion of one batch with RIFE v4.6: one output frame per position
    /// (`i + t`: the frame at time t between frames i and i + 1), scene cuts copied, not blended
    /// (video.rs [`video::interpolate_frames`]).
    pub fn interpolate_frames(&self, frames: Frames<'_>, positions: &[f64], cancel: &Cancel) -> Result<InterpOutput> {
        guard("interpolate_frames", || video::interpolate_frames(&self.rt, frames, positions, cancel))
    }

    /// Any catalog model's pipeline on decoded pixels (output = input x scale, same layout).
    pub fn run_pipeline(&self, m: &ModelInfo, src: RasterRef<'_>, cancel: &Cancel, progress: &mut dyn FnMut(usize, usize)) -> Result<Raster> {
        guard("run", || pipelines::for_model(m)?.run(&self.rt, src, cancel, progress))
    }

    /// A photo catalog model (by name or alias) on decoded pixels.
    pub fn run_model(&self, model: &str, src: RasterRef<'_>, cancel: &Cancel, progress: &mut dyn FnMut(usize, usize)) -> Result<Raster> {
        self.run_pipeline(catalog::lookup(Kind::Photo, model)?, src, cancel, progress)
    }
}

/// Header-only probe with the core's error codes.
pub fn probe(bytes: &[u8]) -> Result<lucent_codec::Probe> {
    guard("probe", || lucent_codec::probe(bytes).map_err(map_codec))
}

#[cfg(test)]
mod tests {
    use super::gpu_device_nodes;

    #[test]
    fn gpu_device_nodes_are_render_card_nvidia_or_dxg() {
        let dev = std::env::temp_dir().join(format!("lucent-dev-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dev);
        std::fs::create_dir_all(dev.join("dri")).unwrap();
        std::fs::write(dev.join("null"), b"").unwrap();
        std::fs::write(dev.join("dri").join("by-path"), b"").unwrap();
        assert!(!gpu_device_nodes(&dev), "no GPU node");
        for node in ["dri/renderD128", "dri/card0", "nvidiactl", "dxg"] {
            std::fs::write(dev.join(node), b"").unwrap();
            assert!(gpu_device_nodes(&dev), "{node}");
            std::fs::remove_file(dev.join(node)).unwrap();
        }
        assert!(!gpu_device_nodes(&dev.join("missing")));
        std::fs::remove_dir_all(&dev).unwrap();
    }
}
