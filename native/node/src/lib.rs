//! napi bindings for the Lucent engine. Thin: every call goes to the ONE process-wide
//! `lucent_engine::Engine` (shared by all worker threads of the process). The public JS API is
//! native/node/index.js + index.d.ts, which wraps these raw exports (AbortSignal handling).
//!
//! Errors: thrown / rejected `Error`s carry `code` = the stable engine code string.

use lucent_core::{Cancel, Code};
use lucent_engine::{catalog, BackendChoice, Engine, EngineOptions as EOpts, EnhanceOptions as XOpts};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use std::path::PathBuf;

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

fn invalid(msg: impl Into<String>) -> napi::Error<ErrCode> {
    napi::Error::new(ErrCode(Code::InvalidArgument.as_str()), msg.into())
}

/// Reject a task with a JS Error whose `code` is the engine's code.
fn reject_with(env: &Env, e: lucent_core::Error) -> napi::Result<()> {
    let err = napi::Error::new(ErrCode(e.code.as_str()), e.message);
    let raw = unsafe { ToNapiValue::to_napi_value(env.raw(), err)? };
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

#[napi(object)]
pub struct EngineOptions {
    pub model_dir: String,
    pub backend: Option<String>,
    pub adapter: Option<String>,
    pub threads: Option<u32>,
    /// Force a tile side (input px); tests and benchmarks.
    pub tile: Option<u32>,
}

#[napi(object)]
pub struct EngineInfo {
    pub backend: String,
    pub adapter: String,
    pub f16: bool,
}

#[napi(object)]
pub struct CatalogEntry {
    pub name: String,
    pub kind: String,
    pub scale: u32,
    pub category: String,
    pub networks: Vec<String>,
    pub description: String,
    pub available: bool,
    /// Why the model is unavailable (absent when available).
    pub reason: Option<String>,
    pub pipeline: String,
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
    pub model: String,
    pub format: String,
    pub exif: Option<bool>,
    pub dpi: Option<f64>,
    pub quality: Option<u32>,
}

#[napi(object)]
pub struct EnhanceResult {
    pub data: Buffer,
    pub width: u32,
    pub height: u32,
    pub format: String,
    pub ms: f64,
    pub decode_ms: f64,
    pub run_ms: f64,
    pub encode_ms: f64,
}

#[napi(object)]
pub struct FramesOptions {
    pub model: String,
    pub width: u32,
    pub height: u32,
    pub count: u32,
    /// Face models: the `faceState` of the previous batch of the same video (omit for its first
    /// batch), so face boxes stay smoothed across batches. Ignored by the other models.
    pub face_state: Option<Buffer>,
}

#[napi(object)]
pub struct FramesResult {
    pub data: Buffer,
    pub width: u32,
    pub height: u32,
    /// Face models only: opaque face-tracker state to pass as `faceState` with the next batch.
    pub face_state: Option<Buffer>,
}

fn info_of(e: &Engine) -> EngineInfo {
    let i = e.info();
    EngineInfo { backend: i.kind.to_string(), adapter: i.adapter.clone(), f16: i.f16 }
}

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

#[napi]
pub fn info() -> Result<EngineInfo, ErrCode> {
    Ok(info_of(Engine::global().map_err(nerr)?))
}

#[napi]
pub fn catalog() -> Vec<CatalogEntry> {
    catalog::CATALOG
        .iter()
        .map(|m| CatalogEntry {
            name: m.name.to_string(),
            kind: m.kind.as_str().to_string(),
            scale: m.scale as u32,
            category: m.category.as_str().to_string(),
            networks: m.networks.iter().map(|s| s.to_string()).collect(),
            description: m.description.to_string(),
            available: m.available(),
            reason: m.unavailable.map(|s| s.to_string()),
            pipeline: m.pipeline.id().to_string(),
        })
        .collect()
}

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

/// Cancellation handle for one call (index.js ties it to an AbortSignal).
#[napi]
pub struct CancelToken {
    inner: Cancel,
}

#[napi]
impl CancelToken {
    #[napi(constructor)]
    pub fn new() -> Self {
        CancelToken { inner: Cancel::new() }
    }
    #[napi]
    pub fn cancel(&self) {
        self.inner.cancel()
    }
    #[napi(getter)]
    pub fn cancelled(&self) -> bool {
        self.inner.is_cancelled()
    }
}

impl Default for CancelToken {
    fn default() -> Self {
        Self::new()
    }
}

type Progress = ThreadsafeFunction<u32, Unknown<'static>, u32, Status, false, true>;

pub struct EnhanceTask {
    data: Vec<u8>,
    opts: XOpts,
    cancel: Cancel,
    progress: Option<Progress>,
    err: Option<lucent_core::Error>,
}

impl Task for EnhanceTask {
    type Output = lucent_engine::EnhanceOutput;
    type JsValue = EnhanceResult;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let engine = stash(&mut self.err, Engine::global())?;
        let last = std::sync::atomic::AtomicU32::new(u32::MAX);
        let tsfn = self.progress.as_ref();
        let report = |p: u32| {
            if let Some(f) = tsfn {
                if last.swap(p, std::sync::atomic::Ordering::Relaxed) != p {
                    f.call(p, ThreadsafeFunctionCallMode::NonBlocking);
                }
            }
        };
        let r = engine.enhance(&self.data, &self.opts, &self.cancel, &report);
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
}

/// Raw export; index.js wraps it as `enhance(data, opts, signal?, onProgress?)`.
#[napi(ts_return_type = "Promise<EnhanceResult>")]
pub fn enhance_raw(
    data: Buffer,
    opts: EnhanceOptions,
    token: Option<&CancelToken>,
    on_progress: Option<Progress>,
) -> Result<AsyncTask<EnhanceTask>, ErrCode> {
    let quality = match opts.quality {
        Some(q) if !(1..=100).contains(&q) => return Err(invalid(format!("quality {q}: expected 1..100"))),
        q => q.map(|q| q as u8),
    };
    Ok(AsyncTask::new(EnhanceTask {
        data: data.to_vec(),
        opts: XOpts { model: opts.model, format: opts.format, exif: opts.exif.unwrap_or(false), dpi: opts.dpi, quality },
        cancel: token.map(|t| t.inner.clone()).unwrap_or_default(),
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
    face_state: Option<Vec<u8>>,
    cancel: Cancel,
    err: Option<lucent_core::Error>,
}

impl Task for FramesTask {
    type Output = (Vec<u8>, usize, usize, Option<Vec<u8>>);
    type JsValue = FramesResult;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let engine = stash(&mut self.err, Engine::global())?;
        let face_model = lucent_engine::face::style(lucent_engine::Kind::Video, &self.model).is_some();
        let r = if face_model {
            lucent_engine::face::FaceTracker::from_bytes(self.face_state.as_deref().unwrap_or(&[])).and_then(|mut t| {
                let (d, w, h) =
                    engine.enhance_frames_tracked(&self.data, self.w, self.h, self.count, &self.model, &mut t, &self.cancel)?;
                Ok((d, w, h, Some(t.to_bytes())))
            })
        } else {
            engine.enhance_frames(&self.data, self.w, self.h, self.count, &self.model, &self.cancel).map(|(d, w, h)| (d, w, h, None))
        };
        self.data = Vec::new();
        stash(&mut self.err, r)
    }

    fn resolve(&mut self, _env: Env, o: Self::Output) -> napi::Result<FramesResult> {
        Ok(FramesResult { data: o.0.into(), width: o.1 as u32, height: o.2 as u32, face_state: o.3.map(Into::into) })
    }

    fn reject(&mut self, env: Env, err: napi::Error) -> napi::Result<FramesResult> {
        reject_stashed(&env, &mut self.err, err)
    }
}

/// Raw export; index.js wraps it as `enhanceFrames(frames, opts, signal?)`.
#[napi(ts_return_type = "Promise<FramesResult>")]
pub fn enhance_frames_raw(frames: Buffer, opts: FramesOptions, token: Option<&CancelToken>) -> Result<AsyncTask<FramesTask>, ErrCode> {
    Ok(AsyncTask::new(FramesTask {
        data: frames.to_vec(),
        model: opts.model,
        w: opts.width as usize,
        h: opts.height as usize,
        count: opts.count as usize,
        face_state: opts.face_state.map(|b| b.to_vec()),
        cancel: token.map(|t| t.inner.clone()).unwrap_or_default(),
        err: None,
    }))
}
