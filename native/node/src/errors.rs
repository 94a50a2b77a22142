//! Engine errors across the boundary: the stable codes as a generated TS type, and the helpers that
//! throw / reject JS `Error`s whose `code` is the engine's code.

use lucent_core::Code;
use napi::bindgen_prelude::*;
use napi_derive::napi;

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
    /// The call's work meter would pass its `budget` (checked before each network run).
    BudgetExceeded,
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
            Code::BudgetExceeded => EngineErrorCode::BudgetExceeded,
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

pub(crate) fn nerr(e: lucent_core::Error) -> napi::Error<ErrCode> {
    napi::Error::new(ErrCode(e.code.as_str()), e.message)
}

/// Reject a task with a JS Error whose `code` is the engine's code.
fn reject_with(env: &Env, e: lucent_core::Error) -> napi::Result<()> {
    let raw = unsafe { ToNapiValue::to_napi_value(env.raw(), nerr(e))? };
    let unknown = unsafe { Unknown::from_raw_unchecked(env.raw(), raw) };
    Err(napi::Error::from(unknown))
}

/// A task's `compute` keeps the engine error here for `reject`; the task itself fails with the message.
pub(crate) fn stash<T>(slot: &mut Option<lucent_core::Error>, r: lucent_core::Result<T>) -> napi::Result<T> {
    r.map_err(|e| {
        let m = e.message.clone();
        *slot = Some(e);
        napi::Error::from_reason(m)
    })
}

/// A task's `reject`: the stashed engine error (else an internal one) as a JS Error with its code.
pub(crate) fn reject_stashed<T>(env: &Env, slot: &mut Option<lucent_core::Error>, err: napi::Error) -> napi::Result<T> {
    let e = slot.take().unwrap_or_else(|| lucent_core::Error::new(Code::Internal, err.reason.clone()));
    reject_with(env, e)?;
    Err(err)
}
