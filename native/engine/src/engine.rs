//! The process-wide engine: one backend, one model cache, the photo and video entry points.

use crate::catalog::{self, Kind, ModelInfo, PadMode, Pipeline};
use crate::flops;
use crate::raster::{Raster, RasterMut, RasterRef};
use crate::resample::resample_alpha;
use crate::tiling::{run_tiled, TilePlan};
use lucent_core::ncnn::Net;
use lucent_core::{Backend, BackendInfo, Cancel, Code, Error, Prepared, Result};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
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

#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// Directory laid out like shared/models (sr/, face/, denoise/ ...).
    pub model_dir: PathBuf,
    /// None: env LUCENT_BACKEND, else Auto.
    pub backend: Option<BackendChoice>,
    /// Substring of the wgpu adapter name to prefer. None: env LUCENT_ADAPTER.
    pub adapter: Option<String>,
    /// CPU backend threads (None: all cores).
    pub threads: Option<usize>,
    /// Force this tile side (input px) instead of the backend's `max_tile` (tests, benchmarks).
    pub tile: Option<usize>,
}

/// A network loaded and prepared on the engine's backend.
#[derive(Clone)]
pub struct LoadedNet {
    pub stem: String,
    pub net: Arc<Net>,
    pub prepared: Arc<dyn Prepared>,
    pub in_blob: usize,
    pub out_blob: usize,
}

/// Everything the tiled SR pipeline needs to know about one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrSpec {
    pub stem: String,
    pub net_scale: usize,
    /// Final scale (net_scale / down).
    pub scale: usize,
    pub pad: usize,
    pub pad_mode: PadMode,
    pub margin: usize,
}

impl SrSpec {
    pub fn for_model(m: &ModelInfo) -> Result<SrSpec> {
        if m.pipeline != Pipeline::TiledSr {
            return Err(Error::new(Code::UnknownModel, format!("model '{}' has no runnable pipeline", m.name)));
        }
        let stem = m.networks.first().ok_or_else(|| Error::new(Code::Internal, "model without network"))?;
        let pp = m.prepost().ok_or_else(|| Error::new(Code::Internal, format!("no pre/post facts for {stem}")))?;
        if pp.net_scale % m.scale != 0 {
            return Err(Error::new(Code::Internal, format!("model {} scale {} does not divide net scale {}", m.name, m.scale, pp.net_scale)));
        }
        Ok(SrSpec {
            stem: stem.to_string(),
            net_scale: pp.net_scale,
            scale: m.scale,
            pad: pp.pad,
            pad_mode: pp.pad_mode,
            margin: m.tile_margin.max(pp.pad),
        })
    }
}

type Slot = Arc<Mutex<Option<LoadedNet>>>;

pub struct Engine {
    backend: Arc<dyn Backend>,
    info: BackendInfo,
    model_dir: PathBuf,
    tile: Option<usize>,
    models: Mutex<HashMap<String, Slot>>,
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Build the backend the options ask for.
pub fn make_backend(opts: &EngineOptions) -> Result<Arc<dyn Backend>> {
    let choice = match opts.backend {
        Some(c) => c,
        None => match std::env::var("LUCENT_BACKEND") {
            Ok(v) => BackendChoice::parse(&v)?,
            Err(_) => BackendChoice::Auto,
        },
    };
    let adapter = opts.adapter.clone().or_else(|| std::env::var("LUCENT_ADAPTER").ok().filter(|s| !s.is_empty()));
    match choice {
        BackendChoice::Cpu => cpu_backend(opts.threads),
        BackendChoice::Gpu => gpu_backend(adapter, true),
        BackendChoice::Auto => match gpu_backend(adapter, false) {
            Ok(b) => Ok(b),
            Err(_) => cpu_backend(opts.threads),
        },
    }
}

fn cpu_backend(threads: Option<usize>) -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(lucent_core::cpu::CpuBackend::new(threads)))
}

#[cfg(feature = "gpu")]
fn gpu_backend(adapter: Option<String>, allow_cpu_adapter: bool) -> Result<Arc<dyn Backend>> {
    let env = lucent_gpu::GpuOptions::from_env();
    let b = lucent_gpu::GpuBackend::new(lucent_gpu::GpuOptions {
        adapter_name: adapter,
        allow_cpu_adapter: allow_cpu_adapter || env.allow_cpu_adapter,
        force_f32: env.force_f32,
    })?;
    Ok(Arc::new(b))
}

#[cfg(not(feature = "gpu"))]
fn gpu_backend(_adapter: Option<String>, _allow_cpu_adapter: bool) -> Result<Arc<dyn Backend>> {
    Err(Error::new(Code::GpuUnavailable, "this build has no GPU backend (feature `gpu` off)"))
}

impl Engine {
    /// A private engine (tests, the CLI). Most callers want [`Engine::init`].
    pub fn new(opts: EngineOptions) -> Result<Engine> {
        guard("engine init", || {
            let backend = make_backend(&opts)?;
            Engine::with_backend(backend, &opts.model_dir, opts.tile)
        })
    }

    pub fn with_backend(backend: Arc<dyn Backend>, model_dir: &Path, tile: Option<usize>) -> Result<Engine> {
        if !model_dir.is_dir() {
            return Err(Error::new(Code::ModelMissing, format!("model directory {} does not exist", model_dir.display())));
        }
        let info = backend.info();
        Ok(Engine { backend, info, model_dir: model_dir.to_path_buf(), tile, models: Mutex::new(HashMap::new()) })
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

    pub fn info(&self) -> &BackendInfo {
        &self.info
    }
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }
    pub fn model_dir(&self) -> &Path {
        &self.model_dir
    }

    /// Load + prepare a network once (per stem); concurrent callers for the same stem wait for the
    /// first one, other stems are not blocked. Failures are not cached.
    pub fn network(&self, stem: &str) -> Result<LoadedNet> {
        let slot = {
            let mut map = lock(&self.models);
            map.entry(stem.to_string()).or_default().clone()
        };
        let mut s = lock(&slot);
        if let Some(l) = s.as_ref() {
            return Ok(l.clone());
        }
        if stem.split(['/', '\\']).any(|c| c == "..") && !Path::new(stem).is_absolute() {
            return Err(Error::new(Code::InvalidArgument, format!("network path '{stem}' leaves the model dir")));
        }
        let path = self.model_dir.join(stem);
        let net = Arc::new(Net::load_stem(&path)?);
        let in_blob = net
            .blob("data")
            .or_else(|| net.input_blobs().first().copied())
            .ok_or_else(|| Error::new(Code::ModelInvalid, format!("{stem}: no input blob")))?;
        let out_blob = net
            .blob("output")
            .or_else(|| net.output_blobs().first().copied())
            .ok_or_else(|| Error::new(Code::ModelInvalid, format!("{stem}: no output blob")))?;
        let prepared = self.backend.prepare(net.clone())?;
        let l = LoadedNet { stem: stem.to_string(), net, prepared, in_blob, out_blob };
        *s = Some(l.clone());
        Ok(l)
    }

    /// Tile side for a network on this engine.
    pub fn tile_for(&self, net: &Net) -> usize {
        self.tile.unwrap_or_else(|| self.backend.max_tile(net)).max(8)
    }

    /// Run a tiled SR spec from `src` into `dst` (sizes: dst = src x spec.scale). Colour through the
    /// network, alpha through the bicubic resampler. `progress(done, total)` per tile.
    pub fn run_sr_into(
        &self,
        spec: &SrSpec,
        src: RasterRef<'_>,
        dst: &mut RasterMut<'_>,
        cancel: &Cancel,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<()> {
        let l = self.network(&spec.stem)?;
        let plan = TilePlan {
            net_scale: spec.net_scale,
            down: spec.net_scale / spec.scale,
            pad: spec.pad,
            pad_mode: spec.pad_mode,
            margin: spec.margin,
            tile: self.tile_for(&l.net),
        };
        run_tiled(l.prepared.as_ref(), l.in_blob, l.out_blob, src, dst, &plan, cancel, progress)?;
        resample_alpha(src, dst, cancel)
    }

    /// Run a tiled SR spec, allocating the output (same channels and bit depth as the input).
    pub fn run_sr(
        &self,
        spec: &SrSpec,
        src: RasterRef<'_>,
        cancel: &Cancel,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Raster> {
        guard("run", || {
            let (ow, oh) = (src.width * spec.scale, src.height * spec.scale);
            let mut out = Raster::new(ow, oh, src.channels, src.bit_depth())?;
            self.run_sr_into(spec, src, &mut out.as_mut(), cancel, progress)?;
            Ok(out)
        })
    }

    /// Run a photo catalog model on decoded pixels.
    pub fn run_model(
        &self,
        model: &str,
        src: RasterRef<'_>,
        cancel: &Cancel,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Raster> {
        let m = catalog::lookup(Kind::Photo, model)?;
        self.run_pipeline(m, src, cancel, progress)
    }

    /// Run any catalog model's pipeline on decoded pixels (output = input x scale, same layout).
    pub fn run_pipeline(
        &self,
        m: &ModelInfo,
        src: RasterRef<'_>,
        cancel: &Cancel,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Raster> {
        match m.pipeline {
            Pipeline::TiledSr => self.run_sr(&SrSpec::for_model(m)?, src, cancel, progress),
            Pipeline::Srmd => self.run_srmd(m, src, cancel, progress),
            Pipeline::Denoise(kind) => self.run_denoise_model(m, kind, src, cancel, progress),
            Pipeline::Face => self.run_face_model(m, src, cancel, progress),
            Pipeline::Unavailable => {
                Err(Error::new(Code::UnknownModel, format!("model '{}' has no runnable pipeline", m.name)))
            }
        }
    }

    /// An SR spec for a bare network stem (path relative to the model dir, or absolute, without
    /// extension): pre/post facts from the catalog table when known, else reflect-pad 10; the
    /// scale is inferred from the graph.
    pub fn spec_for_stem(&self, stem: &str) -> Result<SrSpec> {
        let l = self.network(stem)?;
        let (c, oh, ow) = flops::blob_shape(&l.net, 64, 64, l.out_blob)
            .ok_or_else(|| Error::new(Code::ModelInvalid, format!("{stem}: cannot infer the output size")))?;
        if c != 3 || ow != oh || ow % 64 != 0 || ow == 0 {
            return Err(Error::new(Code::ModelInvalid, format!("{stem}: not an RGB x-scale network (64x64 -> {c}x{oh}x{ow})")));
        }
        let net_scale = ow / 64;
        let (pad, pad_mode) = match catalog::prepost(stem) {
            Some(pp) => (pp.pad, pp.pad_mode),
            None => (10, PadMode::Reflect),
        };
        Ok(SrSpec { stem: stem.to_string(), net_scale, scale: net_scale, pad, pad_mode, margin: pad.max(16) })
    }

    /// Video frames: `count` packed RGB24 frames of w x h through a video catalog model; returns
    /// the packed RGB24 output frames and their size.
    pub fn enhance_frames(
        &self,
        rgb24: &[u8],
        w: usize,
        h: usize,
        count: usize,
        model: &str,
        cancel: &Cancel,
    ) -> Result<(Vec<u8>, usize, usize)> {
        guard("enhance_frames", || {
            let m = catalog::lookup(Kind::Video, model)?;
            if m.pipeline == Pipeline::Face {
                // Boxes smoothed within this batch only; to carry the smoothing across the batches
                // of one video use `enhance_frames_tracked` (face/mod.rs).
                return self.face_frames(rgb24, w, h, count, m, &mut crate::face::FaceTracker::new(), cancel);
            }
            let spec = SrSpec::for_model(m)?;
            let (ow, oh) = (w * spec.scale, h * spec.scale);
            let (frame, oframe, mut out) = frame_batch(rgb24, w, h, count, ow, oh)?;
            for i in 0..count {
                cancel.check()?;
                let src = RasterRef::new_u8(w, h, 3, &rgb24[i * frame..(i + 1) * frame])?;
                let mut dst = RasterMut::new_u8(ow, oh, 3, &mut out[i * oframe..(i + 1) * oframe])?;
                self.run_sr_into(&spec, src, &mut dst, cancel, &mut |_, _| {})?;
            }
            Ok((out, ow, oh))
        })
    }
}

/// Checks that `rgb24` holds `count` packed RGB24 frames of `w` x `h` and allocates the output batch
/// (`count` frames of `ow` x `oh`) without aborting on failure. Returns (input frame bytes, output frame
/// bytes, zeroed output buffer).
pub(crate) fn frame_batch(rgb24: &[u8], w: usize, h: usize, count: usize, ow: usize, oh: usize) -> Result<(usize, usize, Vec<u8>)> {
    let frame = w
        .checked_mul(h)
        .and_then(|p| p.checked_mul(3))
        .filter(|&f| f > 0)
        .ok_or_else(|| Error::new(Code::InvalidArgument, format!("bad frame size {w}x{h}")))?;
    if frame.checked_mul(count) != Some(rgb24.len()) {
        return Err(Error::new(Code::InvalidArgument, format!("{} bytes is not {count} RGB24 frames of {w}x{h}", rgb24.len())));
    }
    let oframe = ow * oh * 3;
    let total = oframe.checked_mul(count).ok_or_else(|| Error::new(Code::ImageTooLarge, "output too large"))?;
    let mut out = Vec::new();
    out.try_reserve_exact(total).map_err(|_| Error::new(Code::ImageTooLarge, format!("cannot allocate {total} bytes")))?;
    out.resize(total, 0u8);
    Ok((frame, oframe, out))
}
