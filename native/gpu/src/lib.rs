//! Lucent's wgpu backend: WGSL compute kernels on Vulkan / Metal / DX12.
//!
//! One process-wide GPU device lives on a dedicated thread ("lucent-gpu"). Every backend handle
//! and prepared network talks to it over a channel; all wgpu objects stay on that thread. wgpu
//! errors never panic: an uncaptured-error handler records them, pipeline and buffer creation run
//! inside error scopes, waits on the GPU have a timeout, and a lost device fails the in-flight and
//! every later call with `device_lost` (a later [`GpuBackend::new`] opens a fresh device).
//! Over 500 lines on purpose: the device thread, its message loop and the public handles form one
//! protocol (every request, reply and failure path), kept readable side by side; kernels live in `ops/`.
//!
//! Options: [`GpuOptions`], given by the caller (the crate reads no `LUCENT_*` environment; the
//! server maps its settings onto the addon's init options, the bench CLI at its `main`). Setting
//! names in parentheses: `adapter_name` (`LUCENT_ADAPTER`, adapter name substring or `#N` index: [`select`]), `force_f32`
//! (`LUCENT_GPU_F32=1`, ignore SHADER_F16), `f16_math` (`LUCENT_GPU_F16_MATH=1`, accumulate
//! convolutions in f16 too), `profile` (`LUCENT_GPU_PROFILE=1`, per-layer GPU times to stderr when
//! TIMESTAMP_QUERY is available), `timeout` (`LUCENT_GPU_TIMEOUT_S`, default 600, 3600 on CPU adapters),
//! `conv` (`LUCENT_GPU_CONV=fma|rb[:MC,PX]|direct|bm,bn,bk,tm`, force the convolution kernel / tile),
//! `pipeline` (`LUCENT_GPU_PIPELINE=1`, the GEMM kernels' pipelined form: double-buffered K slices),
//! `coop` (`LUCENT_GPU_COOP=0` never use cooperative matrices; `1` also on CPU adapters; `emulate`
//! forces the emulated MMA kernel), `tune` (`LUCENT_GPU_TUNE=0|1|SIDE`, measured tile choice,
//! [`tune`]: on by default for GPUs unless `conv` or `pipeline` ask for a kernel or form; `1` also
//! on CPU adapters; a number >= 8 is the probe's side in pixels, default 256), `tune_cache`
//! (`LUCENT_GPU_TUNE_CACHE`). The string forms parse with [`ConvForce::parse`], [`Coop::parse`],
//! [`TuneMode::parse`].
//!
//! Convolutions run on cooperative matrices (tensor cores, [`ops::mma`]) when the adapter lists
//! the f16 x f16 -> f32 16x16x16 (or 8x8x8) configuration and offers SUBGROUP and SHADER_F16;
//! the experimental feature is then requested explicitly. Otherwise GPUs run the FMA implicit
//! GEMM of [`ops::conv_gemm`] (DX12, older GPUs). CPU adapters (lavapipe) run the
//! register-blocked direct kernel of [`ops::rb`], which suits a SIMD CPU's JIT better, even where
//! they list cooperative matrices (the device is still opened with them, so tests can force them).
//!
//! Layout: this file (device thread, handles, settings from the options, prepare = tune then
//! build); `ops/` (one op family per file: its WGSL, typed parameters and recording);
//! `select.rs` (which adapter opens); `choice.rs` (which convolution kernel runs where); `tune.rs` (the measured choice);
//! `prep.rs` (a prepared network: fusion, recording each run); `rec.rs` (one run's buffers,
//! commands, submission and readback); `shape.rs`; `variants.rs` (every shader variant, for the
//! tests). Modules depend downward only: lib -> tune -> prep -> ops -> rec -> shape, with
//! `choice` between `conv_step` (and prep, tune) and the kernels it chooses from
//! (`ops::conv_gemm`, `ops::mma`, `ops::rb`); all of them use this file's `DevCtx` and
//! `Settings`.

mod choice;
mod conv_step;
pub mod ops;
mod prep;
mod rec;
pub mod select;
mod shape;
pub mod tune;
mod variants;

pub use select::{select_adapter, AdapterDesc, AdapterPick};
pub use variants::{probe_coop, shader_variants};

use ops::conv_gemm::ConvCfg;
use ops::mma::{self, MmaCfg, MmaMode};
use ops::rb;
use lucent_core::error::{Code, Error, Result};
use lucent_core::ncnn::Net;
use lucent_core::backend::Storage;
use lucent_core::{Backend, BackendInfo, Cancel, Prepared, Tensor};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

pub use prep::LayerTime;
pub use tune::Tuning;

/// The options and their parts live in lucent-core (plain data; see there).
pub use lucent_core::options::{CacheFile, ConvForce, Coop, GpuOptions, TuneMode};

const BACKENDS: wgpu::Backends =
    wgpu::Backends::VULKAN.union(wgpu::Backends::METAL).union(wgpu::Backends::DX12);

fn new_instance() -> wgpu::Instance {
    quiet_device_select();
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = BACKENDS;
    wgpu::Instance::new(desc)
}

/// Mesa's implicit Vulkan layer VK_LAYER_MESA_device_select (installed with Mesa's drivers) asks
/// the Wayland compositor which GPU is the default one when the instance enables
/// VK_KHR_wayland_surface, which wgpu always does where the driver offers it. Where
/// XDG_RUNTIME_DIR is unset (services, containers, cron) that connection attempt makes
/// libwayland-client print `error: XDG_RUNTIME_DIR is invalid or not set in the environment.` on
/// stderr, once per physical-device enumeration. A compute engine has no compositor to ask and
/// picks its adapter itself (LUCENT_ADAPTER), so there the layer is switched off with its own
/// switch, NODEVICE_SELECT=1, before the first Vulkan instance, unless the operator set one of
/// the variables that steer it (NODEVICE_SELECT, MESA_VK_DEVICE_SELECT, DRI_PRIME).
/// Where XDG_RUNTIME_DIR is a folder (a desktop session) nothing changes.
fn quiet_device_select() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if !cfg!(target_os = "linux") || ["NODEVICE_SELECT", "MESA_VK_DEVICE_SELECT", "DRI_PRIME"].iter().any(|v| std::env::var_os(v).is_some()) {
            return;
        }
        let runtime_dir_ok = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()).is_some_and(|d| std::path::Path::new(&d).is_dir());
        if !runtime_dir_ok {
            // Before any Vulkan instance of this process; the variable is only ever read by the
            // Vulkan loader (and inherited by child processes, where it has the same meaning).
            std::env::set_var("NODEVICE_SELECT", "1");
        }
    });
}

fn type_name(t: wgpu::DeviceType) -> &'static str {
    match t {
        wgpu::DeviceType::DiscreteGpu => "discrete",
        wgpu::DeviceType::IntegratedGpu => "integrated",
        wgpu::DeviceType::VirtualGpu => "virtual",
        wgpu::DeviceType::Cpu => "cpu",
        wgpu::DeviceType::Other => "other",
    }
}

fn desc_of(a: &wgpu::Adapter) -> AdapterDesc {
    let i = a.get_info();
    AdapterDesc { name: i.name, backend: format!("{:?}", i.backend), device_type: type_name(i.device_type).to_string() }
}

/// Every adapter wgpu sees, in its enumeration order: the index of an entry is what `#N`
/// ([`AdapterPick::Index`], `LUCENT_ADAPTER=#N`) chooses. Empty where enumerating fails.
pub fn adapters() -> Vec<AdapterDesc> {
    catch_unwind(|| pollster::block_on(new_instance().enumerate_adapters(BACKENDS)).iter().map(desc_of).collect()).unwrap_or_default()
}

/// Every adapter wgpu sees: (name incl. backend, device type). For diagnostics.
pub fn probe_adapters() -> Vec<(String, String)> {
    adapters().into_iter().map(|a| (format!("{} ({})", a.name, a.backend), a.device_type)).collect()
}

/// Per-handle execution settings (the device is shared, these are not).
#[derive(Clone, Debug)]
pub struct Settings {
    /// f16 storage (only when the device has SHADER_F16).
    pub f16: bool,
    /// f16 accumulation in the convolution GEMM as well (faster, less exact).
    pub f16_math: bool,
    /// Force a convolution tile configuration (tests); None = chosen from the limits.
    pub conv: Option<ConvCfg>,
    /// The GEMM kernels (FMA and MMA) in their pipelined form: double-buffered K slices, and
    /// for the FMA GEMM vec4 tiles (`LUCENT_GPU_PIPELINE=1`).
    pub pipelined: bool,
    /// Per-layer timestamps (only with TIMESTAMP_QUERY).
    pub profile: bool,
    /// Use the direct convolution kernel everywhere (no workgroup-memory tiling).
    pub conv_direct: bool,
    /// The matrix-multiply-accumulate convolution (cooperative matrices or their emulation);
    /// None = the FMA kernel. Ignored where `conv` or `conv_direct` force a kernel.
    pub mma: Option<MmaPlan>,
    /// The register-blocked direct kernel (CPU adapters) instead of the FMA GEMM; used where no
    /// MMA plan applies and `conv` / `conv_direct` force nothing.
    pub rb: Option<rb::RbCfg>,
    /// Time the candidate GEMM tiles and forms per convolution shape at prepare time and run the
    /// fastest ([`tune`]); None = the default choice.
    pub tune: Option<tune::Tune>,
}

/// The tuner's settings from the options ([`TuneMode`]): the probe side and the file cache
/// ([`GpuOptions::tune_cache`]); None: no tuning.
fn tune_of(opts: &GpuOptions, cpu_adapter: bool) -> Option<tune::Tune> {
    let side = match opts.tune {
        TuneMode::Off => None,
        TuneMode::On => Some(tune::DEFAULT_SIDE),
        TuneMode::Side(n) => Some(n),
        TuneMode::Auto => {
            let asked = opts.conv.is_some() || opts.pipeline;
            (!cpu_adapter && !asked).then_some(tune::DEFAULT_SIDE)
        }
    }?;
    Some(tune::Tune { side, cache: opts.tune_cache.resolve("gpu-tune.tsv") })
}

/// Which MMA kernel a handle uses: fragment size and mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MmaPlan {
    pub frag: u32,
    pub mode: MmaMode,
    /// Force this tile configuration (tests); None = the first of [`mma::cfg_lists`] that fits.
    pub cfg: Option<MmaCfg>,
}

/// What [`GpuOptions::conv`] asks of the convolutions.
#[derive(Default)]
struct ConvEnv {
    /// A forced GEMM tile.
    gemm: Option<ConvCfg>,
    /// The direct kernel everywhere.
    direct: bool,
    /// The register-blocked kernel and its tile.
    rb: Option<rb::RbCfg>,
}

/// The convolution kernel [`GpuOptions::conv`] forces ([`ConvForce`]; an invalid tile: the
/// register-blocked kernel's default one, a GEMM tile nothing forced). None: CPU adapters get
/// the register-blocked kernel with its default tile and GPUs nothing forced.
fn conv_of(force: Option<ConvForce>, cpu_adapter: bool) -> ConvEnv {
    match force {
        None => ConvEnv { rb: cpu_adapter.then_some(rb::RbCfg::DEFAULT), ..Default::default() },
        Some(ConvForce::Direct) => ConvEnv { direct: true, ..Default::default() },
        Some(ConvForce::Rb(t)) => {
            let c = t.map(|(mc, px)| rb::RbCfg { mc, px }).filter(|c| c.valid()).unwrap_or(rb::RbCfg::DEFAULT);
            ConvEnv { rb: Some(c), ..Default::default() }
        }
        Some(ConvForce::Gemm([bm, bn, bk, tm])) => ConvEnv { gemm: Some(ConvCfg::new(bm, bn, bk, tm)).filter(|c| c.valid()), ..Default::default() },
        Some(ConvForce::Fma) => ConvEnv::default(),
    }
}

type Job = Box<dyn FnOnce(&mut DevCtx) + Send>;

/// The device thread's side.
pub(crate) struct DevCtx {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub limits: wgpu::Limits,
    pub features: wgpu::Features,
    pub lost: Arc<AtomicBool>,
    pub lost_msg: Arc<Mutex<String>>,
    pub errors: Arc<Mutex<Vec<String>>>,
    /// Adapter name, backend, driver and its version: the tuner's measurements hold for it only.
    pub adapter_id: String,
    pub pipelines: HashMap<String, wgpu::ComputePipeline>,
    pub preps: HashMap<u64, Loaded>,
    /// The tuner's measurements, by convolution shape and settings.
    pub tuned: HashMap<String, tune::Entry>,
    pub dummy: wgpu::Buffer,
    pub timeout: Duration,
}

impl DevCtx {
    fn lost_error(&self) -> Error {
        Error::new(Code::DeviceLost, format!("GPU device lost: {}", self.lost_msg.lock().unwrap()))
    }

    /// Fails with device_lost / internal when the device is gone or wgpu reported an error.
    pub fn check(&self) -> Result<()> {
        if self.lost.load(Ordering::SeqCst) {
            return Err(self.lost_error());
        }
        let errs: Vec<String> = std::mem::take(&mut *self.errors.lock().unwrap());
        if !errs.is_empty() {
            return Err(Error::new(Code::Internal, format!("GPU error: {}", errs.join("; "))));
        }
        Ok(())
    }

    /// Run `f` inside validation + out-of-memory error scopes.
    pub fn scoped<T>(&self, what: &str, f: impl FnOnce() -> T) -> Result<T> {
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let val = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let r = f();
        let e1 = pollster::block_on(val.pop());
        let e2 = pollster::block_on(oom.pop());
        if let Some(e) = e2 {
            return Err(Error::new(Code::Internal, format!("{what}: GPU out of memory: {e}")));
        }
        if let Some(e) = e1 {
            return Err(Error::new(Code::Internal, format!("{what}: {e}")));
        }
        self.check()?;
        Ok(r)
    }

    /// Wait for a submission with the configured timeout; a timeout marks the device lost.
    pub fn wait(&self, idx: wgpu::SubmissionIndex) -> Result<()> {
        let r = self.device.poll(wgpu::PollType::Wait { submission_index: Some(idx), timeout: Some(self.timeout) });
        match r {
            Ok(_) => self.check(),
            Err(wgpu::PollError::Timeout) => {
                *self.lost_msg.lock().unwrap() = format!("GPU did not finish within {:?}", self.timeout);
                self.lost.store(true, Ordering::SeqCst);
                Err(self.lost_error())
            }
            Err(e) => {
                self.check()?;
                Err(Error::new(Code::DeviceLost, format!("GPU poll failed: {e}")))
            }
        }
    }

    pub fn pipeline(&mut self, key: &str, src: impl FnOnce() -> String) -> Result<wgpu::ComputePipeline> {
        if let Some(p) = self.pipelines.get(key) {
            return Ok(p.clone());
        }
        let code = src();
        let device = self.device.clone();
        let p = self.scoped(&format!("compiling kernel {key}"), || {
            let m = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(key),
                source: wgpu::ShaderSource::Wgsl(code.into()),
            });
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(key),
                layout: None,
                module: &m,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            })
        })?;
        self.pipelines.insert(key.to_string(), p.clone());
        Ok(p)
    }
}

/// A prepared network on the device thread, with what the tuner measured for it.
pub(crate) struct Loaded {
    prep: prep::Prep,
    tuning: Vec<Tuning>,
}

/// What the device thread reports once the device is open.
#[derive(Clone, Debug)]
struct DeviceSummary {
    adapter: String,
    device_type: String,
    limits: wgpu::Limits,
    f16: bool,
    timestamps: bool,
    /// Cooperative-matrix fragment size when the device was opened with them.
    coop_frag: Option<u32>,
    subgroup_max: u32,
}

pub(crate) struct DeviceHandle {
    tx: mpsc::Sender<Job>,
    lost: Arc<AtomicBool>,
    summary: DeviceSummary,
    next_id: AtomicU64,
}

impl DeviceHandle {
    pub(crate) fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut DevCtx) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        if self.lost.load(Ordering::SeqCst) {
            return Err(Error::new(Code::DeviceLost, "GPU device lost"));
        }
        let (rtx, rrx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |ctx: &mut DevCtx| {
            let r = catch_unwind(AssertUnwindSafe(|| {
                ctx.check()?;
                f(ctx)
            }))
            .unwrap_or_else(|p| {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                Err(Error::new(Code::Internal, format!("GPU thread panicked: {msg}")))
            });
            let _ = rtx.send(r);
        });
        let gone = || Error::new(Code::DeviceLost, "GPU device thread is gone");
        self.tx.send(job).map_err(|_| gone())?;
        rrx.recv().map_err(|_| gone())?
    }
}

fn open_device(opts: &GpuOptions) -> Result<(DevCtx, DeviceSummary)> {
    let inst = new_instance();
    let adapters = pollster::block_on(inst.enumerate_adapters(BACKENDS));
    let descs: Vec<AdapterDesc> = adapters.iter().map(desc_of).collect();
    let index = select::select_adapter(&descs, &AdapterPick::parse(opts.adapter_name.as_deref())?, opts.allow_cpu_adapter)?;
    let adapter = adapters.into_iter().nth(index).expect("select_adapter answers an index of the list");
    let info = adapter.get_info();
    let af = adapter.features();
    let mut features = wgpu::Features::empty();
    for f in [wgpu::Features::SHADER_F16, wgpu::Features::TIMESTAMP_QUERY] {
        if af.contains(f) {
            features |= f;
        }
    }
    let limits = adapter.limits();
    // Cooperative matrices: only when the adapter lists the f16 x f16 -> f32 shape we use and
    // has subgroups (subgroup_id) and f16; requested with experimental features enabled.
    let coop_needs = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SUBGROUP | wgpu::Features::SHADER_F16;
    let mut coop_frag = if matches!(opts.coop, Coop::Auto | Coop::On) && af.contains(coop_needs) {
        mma::pick_frag(&adapter.cooperative_matrix_properties())
    } else {
        None
    };
    let open = |features: wgpu::Features, experimental: bool| {
        pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("lucent"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features: if experimental {
                // SAFETY: wgpu's experimental cooperative-matrix API; used only with the
                // configurations the adapter lists, and `Coop::Off` (LUCENT_GPU_COOP=0) turns it off.
                unsafe { wgpu::ExperimentalFeatures::enabled() }
            } else {
                wgpu::ExperimentalFeatures::disabled()
            },
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
    };
    let opened = match coop_frag {
        Some(_) => match open(features | coop_needs, true) {
            Ok(d) => {
                features |= coop_needs;
                Ok(d)
            }
            Err(_) => {
                coop_frag = None;
                open(features, false)
            }
        },
        None => open(features, false),
    };
    let (device, queue) = opened.map_err(|e| Error::new(Code::GpuUnavailable, format!("cannot open {}: {e}", info.name)))?;
    let lost = Arc::new(AtomicBool::new(false));
    let lost_msg = Arc::new(Mutex::new(String::new()));
    let errors = Arc::new(Mutex::new(Vec::new()));
    {
        let errors = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let mut v = errors.lock().unwrap();
            if v.len() < 16 {
                v.push(e.to_string());
            }
        }));
        let (lost, lost_msg) = (lost.clone(), lost_msg.clone());
        device.set_device_lost_callback(move |reason, msg| {
            *lost_msg.lock().unwrap() = format!("{reason:?}: {msg}");
            lost.store(true, Ordering::SeqCst);
        });
    }
    let dummy = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("dummy"),
        size: 256,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let timeout = opts
        .timeout
        .filter(|t| !t.is_zero())
        // A CPU adapter (lavapipe) on a busy host can legitimately take many minutes per run.
        .unwrap_or(Duration::from_secs(if info.device_type == wgpu::DeviceType::Cpu { 3600 } else { 600 }));
    let summary = DeviceSummary {
        // The index tells identical GPUs apart (`LUCENT_ADAPTER=#N`): `NVIDIA H100 (Vulkan) #1`.
        adapter: format!("{} ({:?}) #{index}", info.name, info.backend),
        device_type: type_name(info.device_type).to_string(),
        limits: limits.clone(),
        f16: features.contains(wgpu::Features::SHADER_F16),
        timestamps: features.contains(wgpu::Features::TIMESTAMP_QUERY),
        coop_frag,
        subgroup_max: info.subgroup_max_size.max(1),
    };
    let ctx = DevCtx {
        device,
        queue,
        limits,
        features,
        lost,
        lost_msg,
        errors,
        adapter_id: format!("{} ({:?}; {} {})", info.name, info.backend, info.driver, info.driver_info),
        pipelines: HashMap::new(),
        preps: HashMap::new(),
        tuned: HashMap::new(),
        dummy,
        timeout,
    };
    Ok((ctx, summary))
}

fn spawn_device(opts: &GpuOptions) -> Result<Arc<DeviceHandle>> {
    let (tx, rx) = mpsc::channel::<Job>();
    let (itx, irx) = mpsc::sync_channel::<Result<(DeviceSummary, Arc<AtomicBool>)>>(1);
    let opts = opts.clone();
    std::thread::Builder::new()
        .name("lucent-gpu".into())
        .spawn(move || {
            let opened = catch_unwind(AssertUnwindSafe(|| open_device(&opts)))
                .unwrap_or_else(|_| Err(Error::new(Code::GpuUnavailable, "wgpu panicked while opening the device")));
            let mut ctx = match opened {
                Ok((ctx, summary)) => {
                    let _ = itx.send(Ok((summary, ctx.lost.clone())));
                    ctx
                }
                Err(e) => {
                    let _ = itx.send(Err(e));
                    return;
                }
            };
            while let Ok(job) = rx.recv() {
                job(&mut ctx);
            }
        })
        .map_err(|e| Error::new(Code::Internal, format!("cannot start the GPU thread: {e}")))?;
    let (summary, lost) = irx
        .recv()
        .map_err(|_| Error::new(Code::GpuUnavailable, "GPU thread exited while opening the device"))??;
    Ok(Arc::new(DeviceHandle { tx, lost, summary, next_id: AtomicU64::new(1) }))
}

static GLOBAL: Mutex<Option<Arc<DeviceHandle>>> = Mutex::new(None);

/// A handle on the process-wide GPU device.
#[derive(Clone)]
pub struct GpuBackend {
    dev: Arc<DeviceHandle>,
    settings: Settings,
    /// The handle's [`GpuOptions::coop`] (its default MMA plan).
    coop: Coop,
}

impl GpuBackend {
    /// Open (or join) the process-wide device. The first successful call's adapter choice wins;
    /// later calls reuse that device unless it was lost. A later call may widen the choice only
    /// in that a call that does not allow CPU adapters never joins a CPU-adapter device.
    pub fn new(opts: GpuOptions) -> Result<GpuBackend> {
        let mut g = GLOBAL.lock().unwrap_or_else(|p| p.into_inner());
        let reuse = g.as_ref().filter(|d| {
            !d.lost.load(Ordering::SeqCst) && (opts.allow_cpu_adapter || d.summary.device_type != "cpu")
        });
        let dev = match reuse {
            Some(d) => d.clone(),
            None => {
                let d = spawn_device(&opts)?;
                *g = Some(d.clone());
                d
            }
        };
        let cpu_adapter = dev.summary.device_type == "cpu";
        let conv = conv_of(opts.conv, cpu_adapter);
        let f16 = dev.summary.f16 && !opts.force_f32;
        let settings = Settings {
            f16,
            f16_math: opts.f16_math,
            conv: conv.gemm,
            pipelined: opts.pipeline,
            profile: opts.profile && dev.summary.timestamps,
            conv_direct: conv.direct,
            mma: None,
            rb: conv.rb,
            tune: tune_of(&opts, cpu_adapter),
        };
        let mut be = GpuBackend { dev, settings, coop: opts.coop };
        be.settings.mma = be.default_mma();
        Ok(be)
    }

    /// The MMA plan by default: real cooperative matrices where a GPU has them (unless
    /// [`Coop::Off`], `LUCENT_GPU_COOP=0`). A CPU adapter that lists them (lavapipe in Mesa 26.1 does; 25.0 did not) runs
    /// them as per-lane loops, 14x slower than the register-blocked kernel on x4v3, so there they
    /// run only with [`Coop::On`] (`LUCENT_GPU_COOP=1`). [`Coop::Emulate`] picks the emulated kernel
    /// (16x16, 32-wide subgroups) on any device.
    fn default_mma(&self) -> Option<MmaPlan> {
        match self.coop {
            Coop::Off => None,
            Coop::Emulate => Some(MmaPlan { frag: 16, mode: MmaMode::Emulated { sg: 32, f16_tiles: self.dev.summary.f16 }, cfg: None }),
            Coop::On => self.coop_mma(None),
            Coop::Auto => self.coop_mma(None).filter(|_| self.dev.summary.device_type != "cpu"),
        }
    }

    /// The cooperative-matrix fragment size the device was opened with (None: no tensor-core path).
    pub fn coop_frag(&self) -> Option<u32> {
        self.dev.summary.coop_frag
    }

    /// The MMA tile configuration wide layers get on this device with this handle's plan.
    pub fn mma_cfg(&self) -> Option<MmaCfg> {
        let plan = self.settings.mma?;
        plan.cfg.or_else(|| mma::default_cfg(&self.dev.summary.limits, plan.frag, false, plan.mode, self.settings.pipelined))
    }

    pub fn adapter_name(&self) -> &str {
        &self.dev.summary.adapter
    }
    pub fn device_type(&self) -> &str {
        &self.dev.summary.device_type
    }
    pub fn limits(&self) -> &wgpu::Limits {
        &self.dev.summary.limits
    }
    /// Whether the device has SHADER_F16 (whether this handle uses it: `settings().f16`).
    pub fn f16_available(&self) -> bool {
        self.dev.summary.f16
    }
    pub fn timestamps_available(&self) -> bool {
        self.dev.summary.timestamps
    }
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// A handle on the same device with other settings (f16 only where available).
    pub fn with_settings(&self, f: impl FnOnce(&mut Settings)) -> GpuBackend {
        let mut s = self.settings.clone();
        f(&mut s);
        s.f16 &= self.dev.summary.f16;
        s.f16_math &= s.f16;
        s.profile &= self.dev.summary.timestamps;
        s.mma = s.mma.filter(|p| match p.mode {
            MmaMode::Coop { .. } => self.dev.summary.coop_frag == Some(p.frag),
            MmaMode::Emulated { f16_tiles, .. } => !f16_tiles || self.dev.summary.f16,
        });
        GpuBackend { dev: self.dev.clone(), settings: s, coop: self.coop }
    }

    /// The real cooperative-matrix plan of this device (None where it has none), whatever the
    /// default: tests force it on CPU adapters, whose default is the register-blocked kernel.
    pub fn coop_mma(&self, cfg: Option<MmaCfg>) -> Option<MmaPlan> {
        let frag = self.dev.summary.coop_frag?;
        Some(MmaPlan { frag, mode: MmaMode::Coop { sg_max: self.dev.summary.subgroup_max }, cfg })
    }

    /// The emulated MMA plan with `sg`-wide subgroups (f16 tiles where the device has f16),
    /// available on every device; `cfg` forces a tile configuration.
    pub fn emulated_mma(&self, frag: u32, sg: u32, f16_tiles: bool, cfg: Option<MmaCfg>) -> MmaPlan {
        MmaPlan { frag, mode: MmaMode::Emulated { sg, f16_tiles: f16_tiles && self.dev.summary.f16 }, cfg }
    }

    /// The FMA tile configuration the convolution uses for wide layers on this device.
    pub fn conv_cfg(&self) -> ConvCfg {
        self.settings.conv.unwrap_or_else(|| choice::default_fma_cfg(&self.dev.summary.limits, false, self.settings.f16_math, self.settings.pipelined))
    }

    /// Allocate and free a GPU buffer of `bytes` (diagnostics: shows the error path for
    /// requests the device refuses).
    pub fn try_alloc(&self, bytes: u64) -> Result<()> {
        self.dev.call(move |ctx| {
            let d = ctx.device.clone();
            let b = ctx.scoped("allocating a buffer", || {
                d.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("probe"),
                    size: bytes,
                    usage: wgpu::BufferUsages::STORAGE,
                    mapped_at_creation: false,
                })
            })?;
            b.destroy();
            Ok(())
        })
    }

    /// Destroy the device (tests of the device-lost path). Every later call fails with
    /// `device_lost`; a later `GpuBackend::new` opens a fresh device.
    #[doc(hidden)]
    pub fn destroy_device(&self) {
        let _ = self.dev.call(|ctx| {
            ctx.device.destroy();
            let _ = ctx.device.poll(wgpu::PollType::Poll);
            if !ctx.lost.load(Ordering::SeqCst) {
                *ctx.lost_msg.lock().unwrap() = "device destroyed".into();
                ctx.lost.store(true, Ordering::SeqCst);
            }
            Ok(())
        });
    }

    /// Prepare with this handle's settings, returning the concrete type (profile access): with
    /// `settings.tune`, time the candidate GEMMs of each convolution shape first ([`tune`]), then
    /// build the network with every layer on its shape's fastest.
    pub fn prepare_gpu(&self, net: Arc<Net>) -> Result<GpuPrepared> {
        let id = self.dev.next_id.fetch_add(1, Ordering::Relaxed);
        let settings = self.settings.clone();
        let n = net.clone();
        self.dev.call(move |ctx| {
            let (choices, tuning) = match settings.tune.clone() {
                Some(t) => tune::choose(ctx, &n, &settings, &t)?,
                None => (HashMap::new(), Vec::new()),
            };
            if settings.profile {
                tune::print(&tuning);
            }
            let prep = prep::Prep::build(ctx, n, settings, &choices)?;
            ctx.preps.insert(id, Loaded { prep, tuning });
            Ok(())
        })?;
        Ok(GpuPrepared { id, dev: self.dev.clone(), net })
    }
}

impl Backend for GpuBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo { kind: "gpu", adapter: self.dev.summary.adapter.clone(), f16: self.settings.f16, cpu_isa: None, threads: None, cpu_precision: None }
    }
    fn prepare(&self, net: Arc<Net>) -> Result<Arc<dyn Prepared>> {
        Ok(Arc::new(self.prepare_gpu(net)?))
    }
    /// [`Storage::F32`]: this network on a handle of the same device with f32 storage (and no f16
    /// math); every other setting (kernels, tuning, profile) stays the handle's.
    fn prepare_with(&self, net: Arc<Net>, storage: Storage) -> Result<Arc<dyn Prepared>> {
        match storage {
            Storage::Default => self.prepare(net),
            Storage::F32 => Ok(Arc::new(self.with_settings(|s| s.f16 = false).prepare_gpu(net)?)),
        }
    }
    fn max_tile(&self, net: &Net) -> usize {
        prep::max_tile(net, &self.dev.summary.limits, self.settings.f16)
    }
}

/// A network whose weights live on the GPU.
pub struct GpuPrepared {
    id: u64,
    dev: Arc<DeviceHandle>,
    net: Arc<Net>,
}

impl GpuPrepared {
    pub fn net(&self) -> &Arc<Net> {
        &self.net
    }
    /// The kernel of each convolution step ("coop", "mma-emulated", "fma", "rb", "direct"; "+pipelined" appended to a GEMM in that form), in order.
    pub fn conv_kernels(&self) -> Result<Vec<String>> {
        let id = self.id;
        self.dev.call(move |ctx| {
            Ok(ctx.preps.get(&id).map(|p| p.prep.conv_kernels().into_iter().map(String::from).collect()).unwrap_or_default())
        })
    }

    /// What the tuner measured and chose per convolution shape (empty when it did not run).
    pub fn tuning(&self) -> Result<Vec<Tuning>> {
        let id = self.id;
        self.dev.call(move |ctx| Ok(ctx.preps.get(&id).map(|p| p.tuning.clone()).unwrap_or_default()))
    }

    /// Per-layer GPU times of the last run (empty unless profiling was on).
    pub fn last_profile(&self) -> Result<Vec<LayerTime>> {
        let id = self.id;
        self.dev.call(move |ctx| Ok(ctx.preps.get(&id).map(|p| p.prep.last_profile.clone()).unwrap_or_default()))
    }
}

impl Prepared for GpuPrepared {
    fn run(&self, inputs: &[(usize, &Tensor)], outputs: &[usize], cancel: &Cancel) -> Result<Vec<Tensor>> {
        cancel.check()?;
        let inputs: Vec<(usize, Tensor)> = inputs.iter().map(|(i, t)| (*i, (*t).clone())).collect();
        let outputs = outputs.to_vec();
        let cancel = cancel.clone();
        let id = self.id;
        self.dev.call(move |ctx| {
            let mut loaded = ctx.preps.remove(&id).ok_or_else(|| Error::new(Code::Internal, "prepared network is gone"))?;
            let r = loaded.prep.run(ctx, &inputs, &outputs, &cancel);
            ctx.preps.insert(id, loaded);
            r
        })
    }
}

impl Drop for GpuPrepared {
    fn drop(&mut self) {
        let id = self.id;
        let _ = self.dev.call(move |ctx| {
            ctx.preps.remove(&id);
            Ok(())
        });
    }
}
