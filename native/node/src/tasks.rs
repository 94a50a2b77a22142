//! The async calls, `enhance` and `enhanceFrames`: each a napi task on the libuv pool running one
//! engine call, with an optional AbortSignal tied to the call's cancel token and (enhance) a
//! progress callback.

use crate::errors::{reject_stashed, stash};
use lucent_core::{Cancel, Code};
use lucent_engine::{Engine, EnhanceOptions as XOpts, Frames, VideoState};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

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
    /// Output width in pixels: the model runs at its own scale, then the result is resampled
    /// (Lanczos3; area averaging when downscaling 3x or more). Alone: the aspect ratio is kept.
    /// A whole number 1..65535 (else `invalid_argument`); over the model's output limit:
    /// `image_too_large`.
    pub target_width: Option<f64>,
    /// Output height in pixels (see targetWidth).
    pub target_height: Option<f64>,
    /// Bring your own model: run this network file instead of the catalog model `model` (which then
    /// only names it in messages).
    pub network: Option<NetworkFile>,
    /// Work units (output megapixels through the networks, see `work`) this call may spend; absent:
    /// unbounded. The call stops with `budget_exceeded` before a network run that would pass it.
    pub budget: Option<f64>,
}

/// An operator's own network (bring your own model) for one call.
#[napi(object)]
#[derive(Clone)]
pub struct NetworkFile {
    /// A `.pth` / `.pt` / `.ckpt` / `.safetensors` file, or an ncnn stem (`x` for `x.param` + `x.bin`).
    pub path: String,
    /// Input sides must be a multiple of this (pixel-unshuffle, attention windows): each tile is
    /// reflect-padded to it and the output cropped back. Default 1.
    pub multiple: Option<u32>,
    /// Photo limits in megapixels (default 70 in, 432 out, as the catalog's enhance models).
    pub max_in_mp: Option<u32>,
    pub max_out_mp: Option<u32>,
}

impl NetworkFile {
    fn engine(&self) -> lucent_engine::photo::NetworkFile {
        lucent_engine::photo::NetworkFile {
            path: self.path.clone(),
            multiple: self.multiple.unwrap_or(1).max(1) as usize,
            max_in_mp: self.max_in_mp.unwrap_or(70),
            max_out_mp: self.max_out_mp.unwrap_or(432),
        }
    }
}

/// A JS `budget` (work units: output megapixels) as the meter's output pixels: finite, >= 0.
pub(crate) fn budget_px(b: Option<f64>) -> lucent_core::Result<Option<u64>> {
    match b {
        None => Ok(None),
        Some(b) if b.is_finite() && b >= 0.0 => Ok(Some((b * 1e6).floor() as u64)),
        Some(b) => Err(lucent_core::Error::new(Code::InvalidArgument, format!("budget {b}: expected a number >= 0"))),
    }
}

/// The call's token with its meter; a bad `budget` comes back as the error its task fails with.
pub(crate) fn metered(b: Option<f64>) -> (Cancel, Option<lucent_core::Error>) {
    match budget_px(b) {
        Ok(b) => (Cancel::with_budget(b), None),
        Err(e) => (Cancel::new(), Some(e)),
    }
}

/// The work a call's meter counted, in work units (output megapixels).
pub(crate) fn work_units(c: &Cancel) -> f64 {
    c.work() as f64 / 1e6
}

/// A JS number as an output side: a whole number 1..=MAX_TARGET_SIDE.
fn side(name: &str, v: Option<f64>) -> lucent_core::Result<Option<u32>> {
    match v {
        None => Ok(None),
        Some(v) if v.fract() == 0.0 && v >= 1.0 && v <= lucent_engine::photo::MAX_TARGET_SIDE as f64 => Ok(Some(v as u32)),
        Some(v) => Err(lucent_core::Error::new(
            Code::InvalidArgument,
            format!("{name} {v}: expected a whole number 1..{}", lucent_engine::photo::MAX_TARGET_SIDE),
        )),
    }
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
    /// Work units spent: output megapixels delivered by each network run (the base network's
    /// output, each face's region at the output's scale; tile overlap not counted).
    pub work: f64,
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
    /// Bring your own model: run this network file instead of the catalog model `model`. Its
    /// `maxInMp` / `maxOutMp` are per-frame limits here (default 70 in, 36 out).
    pub network: Option<NetworkFile>,
    /// Work units this call may spend (see `EnhanceOptions.budget`); absent: unbounded.
    pub budget: Option<f64>,
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
    /// Work units spent (output megapixels through the networks, see `EnhanceResult.work`).
    pub work: f64,
}

/// `signal.addEventListener` / `removeEventListener` called as (type, listener).
type ListenerMethod<'a> = Function<'a, FnArgs<(&'a str, Function<'a, (), ()>)>, Unknown<'a>>;

/// An AbortSignal tied to one call's [`Cancel`]: its `abort` listener cancels the call (the engine
/// stops at the next tile); the listener is removed when the call settles.
pub(crate) struct AbortLink {
    signal: ObjectRef<false>,
    listener: FunctionRef<(), ()>,
}

impl AbortLink {
    /// Ties `signal` (if any) to `cancel`. An already-aborted signal cancels at once.
    pub(crate) fn tie(env: &Env, signal: Option<Object>, cancel: &Cancel) -> napi::Result<Option<AbortLink>> {
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

pub(crate) fn untie(env: &Env, link: Option<AbortLink>) -> napi::Result<()> {
    link.map_or(Ok(()), |l| l.untie(env))
}

type Progress = ThreadsafeFunction<u32, Unknown<'static>, u32, Status, false, true>;

pub struct EnhanceTask {
    data: Vec<u8>,
    opts: XOpts,
    quality: Option<u32>,
    target: (Option<f64>, Option<f64>),
    cancel: Cancel,
    abort: Option<AbortLink>,
    progress: Option<Progress>,
    /// A bad `budget`, reported by `compute`.
    bad: Option<lucent_core::Error>,
    err: Option<lucent_core::Error>,
}

impl Task for EnhanceTask {
    type Output = lucent_engine::EnhanceOutput;
    type JsValue = EnhanceResult;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let bad = self.bad.take();
        let r = self.cancel.check().and_then(|_| bad.map_or(Ok(()), Err)).and_then(|_| Engine::global()).and_then(|engine| {
            self.opts.quality = match self.quality {
                Some(q) if !(1..=100).contains(&q) => {
                    return Err(lucent_core::Error::new(Code::InvalidArgument, format!("quality {q}: expected 1..100")))
                }
                q => q.map(|q| q as u8),
            };
            self.opts.target_width = side("targetWidth", self.target.0)?;
            self.opts.target_height = side("targetHeight", self.target.1)?;
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
            work: work_units(&self.cancel),
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
    let (cancel, bad) = metered(opts.budget);
    let abort = AbortLink::tie(&env, signal, &cancel)?;
    Ok(AsyncTask::new(EnhanceTask {
        data: data.to_vec(),
        opts: XOpts {
            model: opts.model,
            format: opts.format,
            exif: opts.exif.unwrap_or(false),
            dpi: opts.dpi,
            network: opts.network.as_ref().map(NetworkFile::engine),
            ..Default::default()
        },
        quality: opts.quality,
        target: (opts.target_width, opts.target_height),
        cancel,
        abort,
        progress: on_progress,
        bad,
        err: None,
    }))
}

pub struct FramesTask {
    data: Vec<u8>,
    model: String,
    network: Option<NetworkFile>,
    w: usize,
    h: usize,
    count: usize,
    state: Option<Vec<u8>>,
    cancel: Cancel,
    abort: Option<AbortLink>,
    bad: Option<lucent_core::Error>,
    err: Option<lucent_core::Error>,
}

impl Task for FramesTask {
    type Output = (lucent_engine::FramesOutput, VideoState);
    type JsValue = FramesResult;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let bad = self.bad.take();
        let r = self.cancel.check().and_then(|_| bad.map_or(Ok(()), Err)).and_then(|_| Engine::global()).and_then(|engine| {
            let mut state = VideoState::from_bytes(self.state.as_deref().unwrap_or(&[]));
            let frames = Frames::new(&self.data, self.w, self.h, self.count);
            let out = match &self.network {
                None => engine.enhance_frames(frames, &self.model, Some(&mut state), &self.cancel)?,
                Some(n) => {
                    // The own model's limits, per frame (the registry gives them; 70 in, 36 out by default).
                    let limits = lucent_engine::video::FrameLimits {
                        max_in_mp: Some(n.max_in_mp.unwrap_or(70)),
                        max_out_mp: n.max_out_mp.unwrap_or(36),
                    };
                    let n = n.engine();
                    lucent_engine::guard("enhance_frames", || {
                        lucent_engine::video::enhance_frames_custom(engine.runtime(), frames, &n.path, n.multiple, limits, &self.cancel)
                    })?
                }
            };
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
            work: work_units(&self.cancel),
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
    let (cancel, bad) = metered(opts.budget);
    let abort = AbortLink::tie(&env, signal, &cancel)?;
    Ok(AsyncTask::new(FramesTask {
        data: frames.to_vec(),
        model: opts.model,
        network: opts.network,
        w: opts.width as usize,
        h: opts.height as usize,
        count: opts.count as usize,
        state: opts.face_state.map(|b| b.to_vec()),
        cancel,
        abort,
        bad,
        err: None,
    }))
}
