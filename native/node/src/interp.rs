//! `interpolateFrames`: video frame-rate conversion with RIFE v4.6 on one batch of RGB24 frames
//! (the engine's `Engine::interpolate_frames`), a napi task on the libuv pool with an optional
//! AbortSignal, like `enhanceFrames`.

use crate::errors::{reject_stashed, stash};
use crate::tasks::{metered, untie, work_units, AbortLink};
use lucent_core::Cancel;
use lucent_engine::{Engine, Frames, InterpOutput};
use napi::bindgen_prelude::*;
use napi_derive::napi;

#[napi(object)]
pub struct InterpolateOptions {
    pub width: u32,
    pub height: u32,
    /// Frames in the batch.
    pub count: u32,
    /// One output frame per entry: a position `i + t` in the batch (0 <= p <= count - 1), the frame
    /// at time t between frames i and i + 1; a whole number copies that frame.
    pub positions: Vec<f64>,
    /// Work units this call may spend (each interpolated frame: its megapixels); absent: unbounded.
    /// The call stops with `budget_exceeded` before a RIFE run that would pass it.
    pub budget: Option<f64>,
}

#[napi(object)]
pub struct InterpolateResult {
    /// `count` RGB24 frames of width x height (the input's size).
    pub data: Buffer,
    pub width: u32,
    pub height: u32,
    pub count: u32,
    /// Output indices copied from the nearer frame because their pair is a scene cut.
    pub cuts: Vec<u32>,
    /// Work units spent: the megapixels of the frames RIFE made (copies and cuts are free).
    pub work: f64,
}

pub struct InterpolateTask {
    data: Vec<u8>,
    w: usize,
    h: usize,
    count: usize,
    positions: Vec<f64>,
    cancel: Cancel,
    abort: Option<AbortLink>,
    bad: Option<lucent_core::Error>,
    err: Option<lucent_core::Error>,
}

impl Task for InterpolateTask {
    type Output = InterpOutput;
    type JsValue = InterpolateResult;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let bad = self.bad.take();
        let r = self.cancel.check().and_then(|_| bad.map_or(Ok(()), Err)).and_then(|_| Engine::global()).and_then(|engine| {
            engine.interpolate_frames(Frames::new(&self.data, self.w, self.h, self.count), &self.positions, &self.cancel)
        });
        self.data = Vec::new();
        stash(&mut self.err, r)
    }

    fn resolve(&mut self, _env: Env, o: Self::Output) -> napi::Result<InterpolateResult> {
        Ok(InterpolateResult {
            data: o.rgb24.into(),
            width: o.width as u32,
            height: o.height as u32,
            count: o.count as u32,
            cuts: o.cuts.into_iter().map(|k| k as u32).collect(),
            work: work_units(&self.cancel),
        })
    }

    fn reject(&mut self, env: Env, err: napi::Error) -> napi::Result<InterpolateResult> {
        reject_stashed(&env, &mut self.err, err)
    }

    fn finally(self, env: Env) -> napi::Result<()> {
        untie(&env, self.abort)
    }
}

/// Video frame-rate conversion: `count` RGB24 frames of width x height packed in `frames`, one
/// output frame per `positions` entry (RIFE v4.6 between neighbours; scene cuts copied from the
/// nearer frame, listed in `cuts`). Consecutive batches of one video should overlap by one frame.
/// `signal` aborts (code 'aborted').
#[napi(ts_return_type = "Promise<InterpolateResult>")]
pub fn interpolate_frames(
    env: Env,
    frames: Buffer,
    opts: InterpolateOptions,
    #[napi(ts_arg_type = "AbortSignal")] signal: Option<Object>,
) -> napi::Result<AsyncTask<InterpolateTask>> {
    let (cancel, bad) = metered(opts.budget);
    let abort = AbortLink::tie(&env, signal, &cancel)?;
    Ok(AsyncTask::new(InterpolateTask {
        data: frames.to_vec(),
        w: opts.width as usize,
        h: opts.height as usize,
        count: opts.count as usize,
        positions: opts.positions,
        cancel,
        abort,
        bad,
        err: None,
    }))
}
