//! What every pipeline runs against: the backend, the networks loaded on it (loaded and prepared
//! once per stem, shared by all callers) and the tile side. Pipelines see this, never the
//! [`crate::Engine`] that owns it.

use crate::catalog::{self, PadMode, PrePost};
use crate::flops;
use crate::precision::CpuPrecisions;
use crate::raster::{RasterMut, RasterRef};
use crate::resample::resample_alpha;
use crate::tiling::{run_tiled_with, SrSpec, TileAdapter};
use lucent_core::backend::Storage;
use lucent_core::cpu::Precision;
use lucent_core::ncnn::Net;
use lucent_core::{Backend, BackendInfo, Cancel, Code, Error, Prepared, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A network loaded and prepared on the runtime's backend.
#[derive(Clone)]
pub struct LoadedNet {
    pub stem: String,
    pub net: Arc<Net>,
    pub prepared: Arc<dyn Prepared>,
    pub in_blob: usize,
    pub out_blob: usize,
}

type Slot = Arc<Mutex<Option<LoadedNet>>>;

pub struct Runtime {
    backend: Arc<dyn Backend>,
    info: BackendInfo,
    model_dir: PathBuf,
    tile: Option<usize>,
    networks: Mutex<HashMap<String, Slot>>,
    /// The CPU backend's precision per network (`auto`, precision.rs); None: every network on `backend`.
    cpu_precisions: Option<CpuPrecisions>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Runtime {
    /// A runtime on `backend` reading networks from `model_dir` (laid out like shared/models);
    /// `tile` forces the tile side (input px) instead of the backend's `max_tile` (tests, benchmarks).
    pub fn new(backend: Arc<dyn Backend>, model_dir: &Path, tile: Option<usize>) -> Result<Runtime> {
        if !model_dir.is_dir() {
            return Err(Error::new(Code::ModelMissing, format!("model directory {} does not exist", model_dir.display())));
        }
        let info = backend.info();
        Ok(Runtime { backend, info, model_dir: model_dir.to_path_buf(), tile, networks: Mutex::new(HashMap::new()), cpu_precisions: None })
    }

    /// On a CPU backend, prepare each network at the precision `p` gives it (fp32 ones on the
    /// runtime's own backend); `info()` says so. On another backend, unchanged.
    pub fn with_cpu_precisions(mut self, p: CpuPrecisions) -> Runtime {
        if self.info.kind == "cpu" {
            self.info.cpu_precision = Some(p.describe());
            self.cpu_precisions = Some(p);
        }
        self
    }

    /// The CPU precision `stem` is prepared at (None: the backend's own, no per-network choice).
    pub fn cpu_precision_of(&self, stem: &str) -> Option<Precision> {
        self.cpu_precisions.as_ref().map(|p| p.resolve(stem))
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
        self.network_with(stem, Storage::Default)
    }

    /// [`Self::network`] with a storage precision for this network ([`Storage`]): `F32` keeps its
    /// feature maps and weights in f32 on a GPU backend that would store f16 (the segmentation
    /// nets, pipelines/segment: U²-Net's map drifts to 8.5e-2 in f16). Each (stem, storage) is
    /// loaded and prepared once (on a backend that stores f32 anyway, `F32` is its default: one
    /// network); [`Self::forget`] drops both.
    pub fn network_with(&self, stem: &str, storage: Storage) -> Result<LoadedNet> {
        let storage = if self.info.f16 { storage } else { Storage::Default };
        let slot = {
            let mut map = lock(&self.networks);
            map.entry(network_key(stem, storage)).or_default().clone()
        };
        let mut s = lock(&slot);
        if let Some(l) = s.as_ref() {
            return Ok(l.clone());
        }
        if stem.split(['/', '\\']).any(|c| c == "..") && !Path::new(stem).is_absolute() {
            return Err(Error::new(Code::InvalidArgument, format!("network path '{stem}' leaves the model dir")));
        }
        let path = self.model_dir.join(stem);
        let net = Arc::new(if is_weights_file(&path) { load_weights(&path)? } else { Net::load_stem(&path)? });
        let in_blob = net
            .blob("data")
            .or_else(|| net.input_blobs().first().copied())
            .ok_or_else(|| Error::new(Code::ModelInvalid, format!("{stem}: no input blob")))?;
        let out_blob = net
            .blob("output")
            .or_else(|| net.output_blobs().first().copied())
            .ok_or_else(|| Error::new(Code::ModelInvalid, format!("{stem}: no output blob")))?;
        let backend = match &self.cpu_precisions {
            Some(p) => p.backend(stem, &self.backend),
            None => self.backend.clone(),
        };
        let prepared = backend.prepare_with(net.clone(), storage)?;
        let l = LoadedNet { stem: stem.to_string(), net, prepared, in_blob, out_blob };
        *s = Some(l.clone());
        Ok(l)
    }

    /// Drop a loaded network (an operator removed a model of their own): the next [`Self::network`]
    /// call for `stem` loads it again.
    pub fn forget(&self, stem: &str) -> bool {
        let mut map = lock(&self.networks);
        let f32 = map.remove(&network_key(stem, Storage::F32)).is_some();
        map.remove(&network_key(stem, Storage::Default)).is_some() || f32
    }

    /// Tile side (input px) for a network on this runtime.
    pub fn tile_for(&self, net: &Net) -> usize {
        self.tile.unwrap_or_else(|| self.backend.max_tile(net)).max(8)
    }

    /// Run `spec` tiled from `src` into `dst` (dst = src x spec.scale): colour through the network
    /// with `adapter` around it, alpha through the bicubic resampler. `progress(done, total)` per tile.
    ///
    /// The work meter ([`Cancel::charge`]) is charged `dst`'s pixels before the first tile runs
    /// (the output this run delivers; the tiles' overlap margins are the engine's own cost), so a
    /// call over its budget stops with `budget_exceeded` before the network runs.
    pub fn run_tiled(
        &self,
        spec: &SrSpec,
        adapter: &dyn TileAdapter,
        src: RasterRef<'_>,
        dst: &mut RasterMut<'_>,
        cancel: &Cancel,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<()> {
        cancel.charge(dst.width as u64 * dst.height as u64, &format!("network {} ({}x{} out)", spec.stem, dst.width, dst.height))?;
        self.run_tiled_precharged(spec, adapter, src, dst, cancel, progress)
    }

    /// [`Self::run_tiled`] without the meter's charge: for a caller that charged this run in its
    /// own terms first (the face pipeline charges each face's region at the output's scale).
    pub(crate) fn run_tiled_precharged(
        &self,
        spec: &SrSpec,
        adapter: &dyn TileAdapter,
        src: RasterRef<'_>,
        dst: &mut RasterMut<'_>,
        cancel: &Cancel,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<()> {
        let l = self.network(&spec.stem)?;
        let plan = spec.plan(adapter.tile_side(self.tile_for(&l.net)));
        run_tiled_with(l.prepared.as_ref(), l.in_blob, l.out_blob, src, dst, &plan, adapter, cancel, progress)?;
        resample_alpha(src, dst, cancel)
    }

    /// An SR spec for a bare network stem (path relative to the model dir, or absolute, without
    /// extension), run at its own scale: pre/post facts from the catalog table when known, else
    /// reflect-pad 10; the scale is inferred from the graph.
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
        SrSpec::with_prepost(stem, PrePost { pad_mode, pad, crop: pad * net_scale, net_scale }, net_scale, 16)
    }
}

/// The key of a (stem, storage) in the loaded networks: the stem itself for the backend's default
/// (a NUL never occurs in a path).
fn network_key(stem: &str, storage: Storage) -> String {
    match storage {
        Storage::Default => stem.to_string(),
        Storage::F32 => format!("{stem}\0f32"),
    }
}

/// A weights file read by lucent_models (PyTorch, safetensors or ONNX), by extension; anything else
/// is an ncnn stem (`.param` + `.bin`).
pub fn is_weights_file(path: &Path) -> bool {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    matches!(ext.as_str(), "pth" | "pt" | "ckpt" | "safetensors" | "onnx")
}

/// Read a weights file and build its network (lucent_models: nothing in the file is executed).
fn load_weights(path: &Path) -> Result<Net> {
    let bytes = std::fs::read(path).map_err(|e| Error::new(Code::ModelMissing, format!("cannot read {}: {e}", path.display())))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("model");
    Ok(lucent_models::load(&bytes, name, &lucent_models::Limits::default())?.net)
}
