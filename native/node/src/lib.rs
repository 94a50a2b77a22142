//! napi bindings for the Lucent engine: the `@lucent/native` package. Thin: every call goes to
//! the ONE process-wide `lucent_engine::Engine` (shared by all worker threads of the process).
//!
//! The package's `index.js` (loader) and `index.d.ts` (types) are GENERATED from the `#[napi]`
//! items below by `napi build` (scripts/build-native.mjs): change the API here, never there.
//!
//! Errors: thrown / rejected `Error`s carry `code` = the stable engine code string
//! ([`EngineErrorCode`], the table in native/core/src/error.rs). Async calls take an optional
//! `AbortSignal` (aborting rejects with code `aborted`) and, for `enhance`, a progress callback
//! (a throwing callback is ignored, never fatal).

use lucent_core::{Cancel, Code};
use lucent_engine::{
    catalog, BackendChoice, Category, Engine, EngineOptions as EOpts, EnhanceOptions as XOpts, FaceStyle as XFaceStyle,
    Frames, Kind, Limits, ModelInfo, Pipeline, PriceClass as XPriceClass, VideoState,
};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use std::path::PathBuf;

/// The stable engine error codes: every Error thrown or rejected by this package has one of these
/// as its `code` (mapped once to the API's error_code by the server).
#[napi(string_enum = "snake_case")]
pub enum EngineErrorCode {
    /// Input or output format not supported.
    UnsupportedFormat,
    /// Pixel count / allocation over limits.
    ImageTooLarge,
    /// Corrupt, truncated or hostile input.
    DecodeFailed,
    EncodeFailed,
    /// `backend: 'gpu'` but no adapter.
    GpuUnavailable,
    /// The GPU device was lost mid-run.
    DeviceLost,
    /// A model file is absent or fails its hash.
    ModelMissing,
    /// A model file cannot be parsed, or has an unsupported layer.
    ModelInvalid,
    /// Catalog name not known (or not runnable in this build).
    UnknownModel,
    InvalidArgument,
    /// The call's AbortSignal fired.
    Aborted,
    Internal,
}

impl From<Code> for EngineErrorCode {
    /// Exhaustive: a code added to the core table fails to compile here until it is listed above.
    fn from(c: Code) -> Self {
        match c {
            Code::UnsupportedFormat => EngineErrorCode::UnsupportedFormat,
            Code::ImageTooLarge => EngineErrorCode::ImageTooLarge,
            Code::DecodeFailed => EngineErrorCode::DecodeFailed,
            Code::EncodeFailed => EngineErrorCode::EncodeFailed,
            Code::GpuUnavailable => EngineErrorCode::GpuUnavailable,
            Code::DeviceLost => EngineErrorCode::DeviceLost,
            Code::ModelMissing => EngineErrorCode::ModelMissing,
            Code::ModelInvalid => EngineErrorCode::ModelInvalid,
            Code::UnknownModel => EngineErrorCode::UnknownModel,
            Code::InvalidArgument => EngineErrorCode::InvalidArgument,
            Code::Aborted => EngineErrorCode::Aborted,
            Code::Internal => EngineErrorCode::Internal,
        }
    }
}

/// Every engine error code, in the core table's order (tests check the server maps each one).
#[napi]
pub fn error_codes() -> Vec<EngineErrorCode> {
    Code::ALL.iter().map(|&c| c.into()).collect()
}

/// Error status carrying the engine's stable code string (becomes `err.code` in JS).
pub struct ErrCode(&'static str);

impl AsRef<str> for ErrCode {
    fn as_ref(&self) -> &str {
        self.0
    }
}

impl From<Status> for ErrCode {
    fn from(_: Status) -> Self {
        ErrCode(Code::Internal.as_str())
    }
}

fn nerr(e: lucent_core::Error) -> napi::Error<ErrCode> {
    napi::Error::new(ErrCode(e.code.as_str()), e.message)
}

/// Reject a task with a JS Error whose `code` is the engine's code.
fn reject_with(env: &Env, e: lucent_core::Error) -> napi::Result<()> {
    let raw = unsafe { ToNapiValue::to_napi_value(env.raw(), nerr(e))? };
    let unknown = unsafe { Unknown::from_raw_unchecked(env.raw(), raw) };
    Err(napi::Error::from(unknown))
}

/// A task's `compute` keeps the engine error here for `reject`; the task itself fails with the message.
fn stash<T>(slot: &mut Option<lucent_core::Error>, r: lucent_core::Result<T>) -> napi::Result<T> {
    r.map_err(|e| {
        let m = e.message.clone();
        *slot = Some(e);
        napi::Error::from_reason(m)
    })
}

/// A task's `reject`: the stashed engine error (else an internal one) as a JS Error with its code.
fn reject_stashed<T>(env: &Env, slot: &mut Option<lucent_core::Error>, err: napi::Error) -> napi::Result<T> {
    let e = slot.take().unwrap_or_else(|| lucent_core::Error::new(Code::Internal, err.reason.clone()));
    reject_with(env, e)?;
    Err(err)
}

/// `signal.addEventListener` / `removeEventListener` called as (type, listener).
type ListenerMethod<'a> = Function<'a, FnArgs<(&'a str, Function<'a, (), ()>)>, Unknown<'a>>;

/// An AbortSignal tied to one call's [`Cancel`]: its `abort` listener cancels the call (the engine
/// stops at the next tile); the listener is removed when the call settles.
struct AbortLink {
    signal: ObjectRef<false>,
    listener: FunctionRef<(), ()>,
}

impl AbortLink {
    /// Ties `signal` (if any) to `cancel`. An already-aborted signal cancels at once.
    fn tie(env: &Env, signal: Option<Object>, cancel: &Cancel) -> napi::Result<Option<AbortLink>> {
        let Some(signal) = signal else { return Ok(None) };
        if signal.get_named_property::<Option<bool>>("aborted")?.unwrap_or(false) {
            cancel.cancel();
            return Ok(None);
        }
        let c = cancel.clone();
        let listener = env.create_function_from_closure::<(), (), _>("lucentAbort", move |_| {
            c.cancel();
            Ok(())
        })?;
        let add: ListenerMethod = signal.get_named_property("addEventListener")?;
        add.apply(signal, ("abort", listener).into())?;
        Ok(Some(AbortLink { signal: signal.create_ref()?, listener: listener.create_ref()? }))
    }

    fn untie(self, env: &Env) -> napi::Result<()> {
        let signal = self.signal.get_value(env)?;
        let remove: ListenerMethod = signal.get_named_property("removeEventListener")?;
        remove.apply(signal, ("abort", self.listener.borrow_back(env)?).into())?;
        self.signal.unref(env)
    }
}

fn untie(env: &Env, link: Option<AbortLink>) -> napi::Result<()> {
    link.map_or(Ok(()), |l| l.untie(env))
}

#[napi(object)]
pub struct EngineOptions {
    /// Directory laid out like shared/models (sr/, face/, denoise/ ...).
    pub model_dir: String,
    /// Default: env LUCENT_BACKEND, else 'auto'.
    #[napi(ts_type = "'auto' | 'gpu' | 'cpu'")]
    pub backend: Option<String>,
    /// Substring of the wgpu adapter name to prefer (env LUCENT_ADAPTER).
    pub adapter: Option<String>,
    /// CPU backend threads (default: all cores).
    pub threads: Option<u32>,
    /// Force a tile side in input px (tests and benchmarks; default: the backend's max).
    pub tile: Option<u32>,
}

#[napi(object)]
pub struct EngineInfo {
    #[napi(ts_type = "'gpu' | 'cpu'")]
    pub backend: String,
    /// Adapter name, or 'cpu'.
    pub adapter: String,
    /// shader-f16 in use.
    pub f16: bool,
}

#[napi(string_enum = "lowercase")]
pub enum ModelKind {
    Photo,
    Video,
}

/// Engine category: 'enhance' (DPI honoured) or 'generative' (DPI ignored).
#[napi(string_enum = "lowercase")]
pub enum ModelCategory {
    Enhance,
    Generative,
}

/// The price table row a model bills by.
#[napi(string_enum = "snake_case")]
pub enum PriceClass {
    Enhance,
    GenerativePortrait,
    Generative,
    Standard,
    Premium,
}

/// Size limits (api.md "Limits"): photos have maxInMp / maxOutMp, videos maxOutMp / minSeconds /
/// maxSeconds.
#[napi(object)]
pub struct ModelLimits {
    pub max_in_mp: Option<u32>,
    pub max_out_mp: u32,
    pub min_seconds: Option<f64>,
    pub max_seconds: Option<u32>,
}

/// A face pipeline's style (the catalog's data of that pipeline).
#[napi(object)]
pub struct FaceStyle {
    pub base: String,
    pub base_margin: u32,
    pub face_net: String,
    pub face_margin: u32,
    pub strength: f64,
    pub enlarge_below: f64,
}

/// One model of the catalog (the same facts as models/catalog.json, camelCase).
#[napi(object)]
pub struct CatalogEntry {
    /// e.g. 'general_4x'.
    pub name: String,
    pub kind: ModelKind,
    /// Other API names accepted for this model, e.g. ['detail_denoise'].
    pub aliases: Vec<String>,
    /// Output side / input side: 1, 2 or 4.
    pub scale: u32,
    pub category: ModelCategory,
    pub price_class: PriceClass,
    pub limits: ModelLimits,
    pub description: String,
    /// Model files relative to modelDir, e.g. 'sr/realesr-general-x4v3'.
    pub networks: Vec<String>,
    /// 'tiled_sr' | 'srmd' | 'denoise_ffdnet' | 'face' | 'unavailable' (more may come).
    pub pipeline: String,
    /// False: listed by the API but not runnable here (-> unknown_model).
    pub available: bool,
    /// Why the model is unavailable (absent when available).
    pub reason: Option<String>,
    /// Face pipelines: their style.
    pub face: Option<FaceStyle>,
}

fn entry(m: &ModelInfo) -> CatalogEntry {
    let limits = match m.limits() {
        Limits::Photo { max_in_mp, max_out_mp } => ModelLimits { max_in_mp: Some(max_in_mp), max_out_mp, min_seconds: None, max_seconds: None },
        Limits::Video { max_out_mp, min_seconds, max_seconds } => {
            ModelLimits { max_in_mp: None, max_out_mp, min_seconds: Some(min_seconds), max_seconds: Some(max_seconds) }
        }
    };
    let face = match m.pipeline {
        Pipeline::Face(XFaceStyle { base, base_margin, face_net, face_margin, strength, enlarge_below }) => Some(FaceStyle {
            base: base.to_string(),
            base_margin: base_margin as u32,
            face_net: face_net.to_string(),
            face_margin: face_margin as u32,
            strength: catalog::decimal(strength),
            enlarge_below: catalog::decimal(enlarge_below),
        }),
        _ => None,
    };
    CatalogEntry {
        name: m.name.to_string(),
        kind: match m.kind {
            Kind::Photo => ModelKind::Photo,
            Kind::Video => ModelKind::Video,
        },
        aliases: m.aliases.iter().map(|s| s.to_string()).collect(),
        scale: m.scale as u32,
        category: match m.category {
            Category::Enhance => ModelCategory::Enhance,
            Category::Generative => ModelCategory::Generative,
        },
        price_class: match m.price_class {
            XPriceClass::Enhance => PriceClass::Enhance,
            XPriceClass::GenerativePortrait => PriceClass::GenerativePortrait,
            XPriceClass::Generative => PriceClass::Generative,
            XPriceClass::Standard => PriceClass::Standard,
            XPriceClass::Premium => PriceClass::Premium,
        },
        limits,
        description: m.description.to_string(),
        networks: m.networks.iter().map(|s| s.to_string()).collect(),
        pipeline: m.pipeline.id().to_string(),
        available: m.available(),
        reason: m.unavailable.map(|s| s.to_string()),
        face,
    }
}

#[napi(object)]
pub struct ProbeResult {
    pub format: String,
    pub width: u32,
    pub height: u32,
    pub channels: u32,
    pub bit_depth: u32,
}

#[napi(object)]
pub struct EnhanceOptions {
    /// Photo catalog name (or alias).
    pub model: String,
    /// Output format / extension, with or without the dot ('png', '.jpg').
    pub format: String,
    /// Keep EXIF (default false).
    pub exif: Option<bool>,
    /// Write this DPI (ignored for generative models); default: keep the input's.
    pub dpi: Option<f64>,
    /// JPEG / HEIF quality 1..100 (default 90).
    pub quality: Option<u32>,
}

#[napi(object)]
pub struct EnhanceResult {
    pub data: Buffer,
    pub width: u32,
    pub height: u32,
    pub format: String,
    /// The whole call; decodeMs + runMs + encodeMs are its parts.
    pub ms: f64,
    pub decode_ms: f64,
    pub run_ms: f64,
    pub encode_ms: f64,
}

#[napi(object)]
pub struct FramesOptions {
    /// Video catalog name.
    pub model: String,
    pub width: u32,
    pub height: u32,
    pub count: u32,
    /// The per-video state (`faceState`) the previous batch of the same video returned; omit it
    /// for a video's first batch. Models that keep no state ignore it.
    pub face_state: Option<Buffer>,
}

#[napi(object)]
pub struct FramesResult {
    /// `count` RGB24 frames of width x height (the input's times the model's scale).
    pub data: Buffer,
    pub width: u32,
    pub height: u32,
    /// Models that keep per-video state (the face models: smoothed face tracks): pass it as
    /// `faceState` with the next batch of the same video.
    pub face_state: Option<Buffer>,
}

fn info_of(e: &Engine) -> EngineInfo {
    let i = e.info();
    EngineInfo { backend: i.kind.to_string(), adapter: i.adapter.clone(), f16: i.f16 }
}

/// Initialise the process-wide engine (idempotent: later calls return the same engine's info).
#[napi]
pub fn init(opts: EngineOptions) -> Result<EngineInfo, ErrCode> {
    let backend = match opts.backend.as_deref() {
        Some(b) => Some(BackendChoice::parse(b).map_err(nerr)?),
        None => None,
    };
    let e = Engine::init(EOpts {
        model_dir: PathBuf::from(opts.model_dir),
        backend,
        adapter: opts.adapter.filter(|s| !s.is_empty()),
        threads: opts.threads.map(|t| t as usize),
        tile: opts.tile.map(|t| t as usize),
    })
    .map_err(nerr)?;
    Ok(info_of(e))
}

/// The initialised engine's backend.
#[napi]
pub fn info() -> Result<EngineInfo, ErrCode> {
    Ok(info_of(Engine::global().map_err(nerr)?))
}

/// Every photo and video model of the catalog (photo first, API order).
#[napi]
pub fn catalog() -> Vec<CatalogEntry> {
    catalog::CATALOG.iter().map(entry).collect()
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

type Progress = ThreadsafeFunction<u32, Unknown<'static>, u32, Status, false, true>;

pub struct EnhanceTask {
    data: Vec<u8>,
    opts: XOpts,
    quality: Option<u32>,
    cancel: Cancel,
    abort: Option<AbortLink>,
    progress: Option<Progress>,
    err: Option<lucent_core::Error>,
}

impl Task for EnhanceTask {
    type Output = lucent_engine::EnhanceOutput;
    type JsValue = EnhanceResult;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let r = self.cancel.check().and_then(|_| Engine::global()).and_then(|engine| {
            self.opts.quality = match self.quality {
                Some(q) if !(1..=100).contains(&q) => {
                    return Err(lucent_core::Error::new(Code::InvalidArgument, format!("quality {q}: expected 1..100")))
                }
                q => q.map(|q| q as u8),
            };
            let last = std::sync::atomic::AtomicU32::new(u32::MAX);
            let tsfn = self.progress.as_ref();
            let report = |p: u32| {
                if let Some(f) = tsfn {
                    if last.swap(p, std::sync::atomic::Ordering::Relaxed) != p {
                        // A throwing listener's exception is handed to this no-op: ignored, not fatal.
                        f.call_with_return_value(p, ThreadsafeFunctionCallMode::NonBlocking, |_, _| Ok(()));
                    }
                }
            };
            engine.enhance(&self.data, &self.opts, &self.cancel, &report)
        });
        self.data = Vec::new();
        stash(&mut self.err, r)
    }

    fn resolve(&mut self, _env: Env, o: Self::Output) -> napi::Result<EnhanceResult> {
        Ok(EnhanceResult {
            data: o.data.into(),
            width: o.width,
            height: o.height,
            format: o.format.to_string(),
            ms: o.ms,
            decode_ms: o.decode_ms,
            run_ms: o.run_ms,
            encode_ms: o.encode_ms,
        })
    }

    fn reject(&mut self, env: Env, err: napi::Error) -> napi::Result<EnhanceResult> {
        reject_stashed(&env, &mut self.err, err)
    }

    fn finally(self, env: Env) -> napi::Result<()> {
        untie(&env, self.abort)
    }
}

/// Decode, run the photo model's pipeline, encode. `onProgress` gets 0..100; `signal` aborts
/// (rejects with code 'aborted').
#[napi(ts_return_type = "Promise<EnhanceResult>")]
pub fn enhance(
    env: Env,
    data: Buffer,
    opts: EnhanceOptions,
    #[napi(ts_arg_type = "AbortSignal")] signal: Option<Object>,
    #[napi(ts_arg_type = "(pct: number) => void")] on_progress: Option<Progress>,
) -> napi::Result<AsyncTask<EnhanceTask>> {
    let cancel = Cancel::new();
    let abort = AbortLink::tie(&env, signal, &cancel)?;
    Ok(AsyncTask::new(EnhanceTask {
        data: data.to_vec(),
        opts: XOpts { model: opts.model, format: opts.format, exif: opts.exif.unwrap_or(false), dpi: opts.dpi, quality: None },
        quality: opts.quality,
        cancel,
        abort,
        progress: on_progress,
        err: None,
    }))
}

pub struct FramesTask {
    data: Vec<u8>,
    model: String,
    w: usize,
    h: usize,
    count: usize,
    state: Option<Vec<u8>>,
    cancel: Cancel,
    abort: Option<AbortLink>,
    err: Option<lucent_core::Error>,
}

impl Task for FramesTask {
    type Output = (lucent_engine::FramesOutput, VideoState);
    type JsValue = FramesResult;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let r = self.cancel.check().and_then(|_| Engine::global()).and_then(|engine| {
            let mut state = VideoState::from_bytes(self.state.as_deref().unwrap_or(&[]))?;
            let frames = Frames::new(&self.data, self.w, self.h, self.count);
            let out = engine.enhance_frames(frames, &self.model, Some(&mut state), &self.cancel)?;
            Ok((out, state))
        });
        self.data = Vec::new();
        stash(&mut self.err, r)
    }

    fn resolve(&mut self, _env: Env, (o, state): Self::Output) -> napi::Result<FramesResult> {
        Ok(FramesResult {
            data: o.rgb24.into(),
            width: o.width as u32,
            height: o.height as u32,
            face_state: (!state.is_empty()).then(|| state.to_bytes().into()),
        })
    }

    fn reject(&mut self, env: Env, err: napi::Error) -> napi::Result<FramesResult> {
        reject_stashed(&env, &mut self.err, err)
    }

    fn finally(self, env: Env) -> napi::Result<()> {
        untie(&env, self.abort)
    }
}

/// Video: `count` RGB24 frames of width x height packed in `frames` through a video model; returns
/// RGB24 frames at the model's output size (width*scale x height*scale) and, for models that keep
/// per-video state, `faceState` for the next batch. `signal` aborts (code 'aborted').
#[napi(ts_return_type = "Promise<FramesResult>")]
pub fn enhance_frames(
    env: Env,
    frames: Buffer,
    opts: FramesOptions,
    #[napi(ts_arg_type = "AbortSignal")] signal: Option<Object>,
) -> napi::Result<AsyncTask<FramesTask>> {
    let cancel = Cancel::new();
    let abort = AbortLink::tie(&env, signal, &cancel)?;
    Ok(AsyncTask::new(FramesTask {
        data: frames.to_vec(),
        model: opts.model,
        w: opts.width as usize,
        h: opts.height as usize,
        count: opts.count as usize,
        state: opts.face_state.map(|b| b.to_vec()),
        cancel,
        abort,
        err: None,
    }))
}
