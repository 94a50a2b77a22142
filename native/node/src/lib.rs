//! napi bindings for the Lucent engine: the `@lucent/native` package. Thin: every call goes to
//! the ONE process-wide `lucent_engine::Engine` (shared by all worker threads of the process).
//!
//! The package's `index.js` (loader) and `index.d.ts` (types) are GENERATED from the `#[napi]`
//! items of this crate by `napi build` (scripts/build-native.mjs): change the API here, never there.
//! Here: `init`, `info`, `probe`; `errors.rs`: the error codes; `catalog.rs`: `catalog()`;
//! `tasks.rs`: the async `enhance` and `enhanceFrames`; `interp.rs`: the async `interpolateFrames`;
//! `models.rs`: `inspectModel` (bring your own model).
//!
//! Errors: thrown / rejected `Error`s carry `code` = the stable engine code string
//! (`EngineErrorCode`, the table in native/core/src/error.rs). Async calls take an optional
//! `AbortSignal` (aborting rejects with code `aborted`) and, for `enhance`, a progress callback
//! (a throwing callback is ignored, never fatal).

pub mod catalog;
pub mod errors;
pub mod interp;
pub mod models;
pub mod tasks;

use errors::{nerr, ErrCode};
use lucent_engine::{BackendChoice, Engine, EngineOptions as EOpts};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::path::PathBuf;

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
