//! `segment`: background removal (U²-Net, the engine's `segment::segment_progress`) of one
//! encoded photo, a napi task on the libuv pool with an optional AbortSignal and progress
//! callback, like `enhance`.

use crate::errors::{reject_stashed, stash};
use crate::tasks::{metered, untie, work_units, AbortLink};
use lucent_core::Cancel;
use lucent_engine::segment::{self, SegmentOptions as XOpts, SegmentOutput};
use lucent_engine::{guard, Engine};
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use std::sync::atomic::{AtomicU32, Ordering};

/// The progress callback (as `enhance`'s): called from the task's thread, queued to the JS thread.
type Progress = ThreadsafeFunction<u32, Unknown<'static>, u32, Status, false, true>;

#[napi(object)]
pub struct SegmentOptions {
    /// 'u2netp' (small) or 'u2net' (full): the network file seg/<model>.onnx in the model dir
    /// (any other name: `unknown_model`; file absent: `model_missing`).
    pub model: String,
    /// Format of the matted image: 'png' (default), 'webp', 'tiff', 'tga', 'heif' (with or without
    /// the dot); 'jpg' and 'bmp' hold no alpha: `unsupported_format`. The mask is always PNG.
    pub format: Option<String>,
    /// Work units this call may spend (the photo's megapixels); absent: unbounded. The call
    /// stops with `budget_exceeded` before the network runs.
    pub budget: Option<f64>,
}

#[napi(object)]
pub struct SegmentResult {
    /// The photo, upright (EXIF orientation applied), 8-bit RGB with alpha = the mask, encoded
    /// in `format`.
    pub data: Buffer,
    /// The mask: 8-bit grey PNG of the same size, round(255 * alpha).
    pub mask: Buffer,
    pub width: u32,
    pub height: u32,
    pub format: String,
    /// The whole call, and the network + refinement part of it.
    pub ms: f64,
    pub run_ms: f64,
    /// Work units spent: the photo's megapixels.
    pub work: f64,
}

pub struct SegmentTask {
    data: Vec<u8>,
    opts: XOpts,
    cancel: Cancel,
    abort: Option<AbortLink>,
    progress: Option<Progress>,
    bad: Option<lucent_core::Error>,
    err: Option<lucent_core::Error>,
}

impl Task for SegmentTask {
    type Output = SegmentOutput;
    type JsValue = SegmentResult;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let bad = self.bad.take();
        let last = AtomicU32::new(u32::MAX);
        let tsfn = self.progress.as_ref();
        let report = |p: u32| {
            if let Some(f) = tsfn {
                if last.swap(p, Ordering::Relaxed) != p {
                    // A throwing listener's exception is handed to this no-op: ignored, not fatal.
                    f.call_with_return_value(p, ThreadsafeFunctionCallMode::NonBlocking, |_, _| Ok(()));
                }
            }
        };
        let r = self.cancel.check().and_then(|_| bad.map_or(Ok(()), Err)).and_then(|_| Engine::global()).and_then(|engine| {
            guard("segment", || segment::segment_progress(engine.runtime(), &self.data, &self.opts, &self.cancel, &report))
        });
        self.data = Vec::new();
        stash(&mut self.err, r)
    }

    fn resolve(&mut self, _env: Env, o: Self::Output) -> napi::Result<SegmentResult> {
        Ok(SegmentResult {
            data: o.matted.into(),
            mask: o.mask.into(),
            width: o.width,
            height: o.height,
            format: o.format.to_string(),
            ms: o.ms,
            run_ms: o.run_ms,
            work: work_units(&self.cancel),
        })
    }

    fn reject(&mut self, env: Env, err: napi::Error) -> napi::Result<SegmentResult> {
        reject_stashed(&env, &mut self.err, err)
    }

    fn finally(self, env: Env) -> napi::Result<()> {
        untie(&env, self.abort)
    }
}

/// Background removal: decode the photo (EXIF orientation applied, 70 MP limit), run U²-Net at
/// 320x320 as rembg does, refine the mask's edges at full resolution guided by the photo, and
/// return the subject on a transparent background plus the mask. `signal` aborts (code 'aborted').
/// `onProgress` gets the stages' 0..100, rising: 10 decoded and metered, 60 the network, 80 the
/// refinement, 90 the mask encoded, 100 the matted image encoded (nothing for a refused photo).
#[napi(ts_return_type = "Promise<SegmentResult>")]
pub fn segment(
    env: Env,
    data: Buffer,
    opts: SegmentOptions,
    #[napi(ts_arg_type = "AbortSignal")] signal: Option<Object>,
    #[napi(ts_arg_type = "(pct: number) => void")] on_progress: Option<Progress>,
) -> napi::Result<AsyncTask<SegmentTask>> {
    let (cancel, bad) = metered(opts.budget);
    let abort = AbortLink::tie(&env, signal, &cancel)?;
    Ok(AsyncTask::new(SegmentTask {
        data: data.to_vec(),
        opts: XOpts { model: opts.model, format: opts.format.unwrap_or_default() },
        cancel,
        abort,
        progress: on_progress,
        bad,
        err: None,
    }))
}
